#include "properties/ntxent_case.hpp"

#include <algorithm>
#include <sstream>

#include "base/rng.hpp"

namespace infonce::properties {

Case build_ntxent_case(const CaseSpec& spec) {
  Rng rng(spec.data_seed ^ 0x47e7ULL);
  Case c = pair_family_case(spec);
  c.weight = normal_matrix(rng, spec.embedding_dim, spec.feature_dim);
  NtXentSettings ntxent;
  ntxent.normalize = spec.normalize;
  ntxent.temperature = spec.temperature;
  for (const auto& micro : spec.negatives) {
    auto& shards = ntxent.batches.emplace_back();
    for (const auto& groups : micro) {
      const auto samples = static_cast<std::int64_t>(std::max<std::size_t>(groups.size(), 1));
      NtXentShardBatch shard{normal_matrix(rng, samples, spec.feature_dim), {}};
      apply_pair_style(rng, spec.features, shard.first);
      shard.second =
          spec.include_dd
              ? normal_matrix(rng, samples, spec.feature_dim)
              : Matrix<double>(shard.first + 0.3 * normal_matrix(rng, samples, spec.feature_dim));
      shards.push_back(std::move(shard));
    }
  }
  c.ntxent = std::move(ntxent);
  validate_case(c);
  return c;
}

std::string describe_ntxent(const CaseSpec& spec) {
  std::ostringstream out;
  out << describe_mesh(spec) << " samples=[";
  for (std::size_t m = 0; m < spec.negatives.size(); ++m) {
    out << (m ? "," : "") << "[";
    for (std::size_t d = 0; d < spec.negatives[m].size(); ++d) {
      out << (d ? "," : "") << std::max<std::size_t>(spec.negatives[m][d].size(), 1);
    }
    out << "]";
  }
  out << "] F=" << spec.feature_dim << " D=" << spec.embedding_dim
      << " normalize=" << spec.normalize << " T=" << spec.temperature
      << " views=" << (spec.include_dd ? "unrelated" : "noisy")
      << " reduction=" << name_of(spec.reduction) << " gather=" << name_of(spec.gather)
      << " scalar=" << name_of(spec.scalar) << " data_seed=" << spec.data_seed
      << " features=" << name_of(spec.features);
  return out.str();
}

}  // namespace infonce::properties
