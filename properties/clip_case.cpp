#include "properties/clip_case.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "base/rng.hpp"

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
  for (const auto& micro : spec.negatives) {
    auto& shards = clip.batches.emplace_back();
    for (const auto& groups : micro) {
      const auto pairs = static_cast<std::int64_t>(std::max<std::size_t>(groups.size(), 1));
      TowerPairBatch shard{normal_matrix(rng, pairs, features),
                           normal_matrix(rng, pairs, features)};
      apply_pair_style(rng, spec.features, shard.image);
      apply_pair_style(rng, spec.features, shard.text);
      shards.push_back(std::move(shard));
    }
  }
  c.clip = std::move(clip);
  validate_case(c);
  return c;
}

std::string describe_clip(const CaseSpec& spec) {
  std::ostringstream out;
  out << describe_mesh(spec) << " pairs=[";
  for (std::size_t m = 0; m < spec.negatives.size(); ++m) {
    out << (m ? "," : "") << "[";
    for (std::size_t d = 0; d < spec.negatives[m].size(); ++d) {
      out << (d ? "," : "") << std::max<std::size_t>(spec.negatives[m][d].size(), 1);
    }
    out << "]";
  }
  out << "] F=" << spec.feature_dim << " D=" << spec.embedding_dim
      << " normalize=" << spec.normalize << "/" << (spec.normalize && !spec.include_dd)
      << " T=" << spec.temperature << " bias=" << spec.include_qq
      << " reduction=" << name_of(spec.reduction) << " gather=" << name_of(spec.gather)
      << " scalar=" << name_of(spec.scalar) << " data_seed=" << spec.data_seed
      << " features=" << name_of(spec.features);
  return out.str();
}

}  // namespace infonce::properties
