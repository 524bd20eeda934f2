#include "properties/siglip_case.hpp"

#include <algorithm>
#include <cmath>

#include "base/rng.hpp"
#include "properties/tower_pair_case.hpp"

namespace infonce::properties {

Case build_siglip_case(const CaseSpec& spec) {
  Rng rng(spec.data_seed ^ 0x5161ULL);
  Case c = pair_family_case(spec);
  const std::int32_t features = spec.feature_dim;
  c.weight = normal_matrix(rng, spec.embedding_dim, 2 * features);
  SigLipSettings siglip;
  siglip.image_features = features;
  siglip.image_normalize = spec.normalize;
  siglip.text_normalize = spec.normalize && !spec.include_dd;
  siglip.log_scale = std::log(1.0 / spec.temperature);
  siglip.bias = 2 * rng.normal();
  std::size_t most_pairs = 1;
  for (const auto& micro : spec.negatives) {
    std::size_t pairs = 0;
    for (const auto& groups : micro) pairs += std::max<std::size_t>(groups.size(), 1);
    most_pairs = std::max(most_pairs, pairs);
  }
  if (spec.include_qq) siglip.bias -= std::log(static_cast<double>(most_pairs));
  siglip.batches = draw_tower_pair_batches(rng, spec);
  c.siglip = std::move(siglip);
  validate_case(c);
  return c;
}

std::string describe_siglip(const CaseSpec& spec) {
  return describe_tower_pair_case(spec, "bias_shifted");
}

}  // namespace infonce::properties
