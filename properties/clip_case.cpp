#include "properties/clip_case.hpp"

#include <cmath>

#include "base/rng.hpp"
#include "properties/tower_pair_case.hpp"

namespace infonce::properties {

Case build_clip_case(const CaseSpec& spec) {
  Rng rng(spec.data_seed ^ 0xc11bULL);
  Case c = pair_family_case(spec);
  const std::int32_t features = spec.feature_dim;
  c.weight = normal_matrix(rng, spec.embedding_dim, 2 * features);
  ClipSettings clip;
  clip.image_features = features;
  clip.image_normalize = spec.normalize;
  clip.text_normalize = spec.normalize && !spec.include_dd;
  clip.log_logit_scale = std::log(1.0 / spec.temperature);
  if (spec.include_qq) clip.logit_bias = rng.normal();
  clip.batches = draw_tower_pair_batches(rng, spec);
  c.clip = std::move(clip);
  validate_case(c);
  return c;
}

std::string describe_clip(const CaseSpec& spec) {
  return describe_tower_pair_case(spec, "bias");
}

}  // namespace infonce::properties
