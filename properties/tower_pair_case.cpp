#include "properties/tower_pair_case.hpp"

#include <algorithm>
#include <sstream>

namespace infonce::properties {

std::vector<std::vector<TowerPairBatch>> draw_tower_pair_batches(Rng& rng, const CaseSpec& spec) {
  const std::int32_t features = spec.feature_dim;
  std::vector<std::vector<TowerPairBatch>> batches;
  for (const auto& micro : spec.negatives) {
    auto& shards = batches.emplace_back();
    for (const auto& groups : micro) {
      const auto pairs = static_cast<std::int64_t>(std::max<std::size_t>(groups.size(), 1));
      TowerPairBatch shard{normal_matrix(rng, pairs, features),
                           normal_matrix(rng, pairs, features)};
      apply_pair_style(rng, spec.features, shard.image);
      apply_pair_style(rng, spec.features, shard.text);
      shards.push_back(std::move(shard));
    }
  }
  return batches;
}

std::string describe_tower_pair_case(const CaseSpec& spec, std::string_view bias_axis) {
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
      << " T=" << spec.temperature << " " << bias_axis << "=" << spec.include_qq
      << " reduction=" << name_of(spec.reduction) << " gather=" << name_of(spec.gather)
      << " scalar=" << name_of(spec.scalar) << " data_seed=" << spec.data_seed
      << " features=" << name_of(spec.features);
  return out.str();
}

}  // namespace infonce::properties
