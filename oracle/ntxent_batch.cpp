#include "oracle/ntxent_batch.hpp"

#include <cmath>
#include <string>

#include "base/error.hpp"

namespace infonce::oracle {
namespace {

void check_parameters(const NtXentDescription& description) {
  const RealRows& weight = description.weight;
  if (weight.rows() == 0 || weight.cols() == 0) {
    throw InputError("oracle: ntxent weight must be D x F with D, F >= 1");
  }
  if (!weight.allFinite()) throw InputError("oracle: ntxent weight is not finite");
  const Real t = description.temperature;
  if (!std::isfinite(t) || t <= 0 || !std::isfinite(1 / t)) {
    throw InputError("oracle: ntxent temperature must be finite and > 0 (1 / T finite)");
  }
}

void check_shard(const NtXentDescription& description, const NtXentShardInput& shard,
                 const std::string& where) {
  if (shard.first.rows() == 0) throw InputError("oracle: ntxent " + where + " has no samples");
  if (shard.first.rows() != shard.second.rows()) {
    throw InputError("oracle: ntxent " + where + " has " + std::to_string(shard.first.rows()) +
                     " first views and " + std::to_string(shard.second.rows()) + " second views");
  }
  const Eigen::Index width = description.weight.cols();
  if (shard.first.cols() != width || shard.second.cols() != width) {
    throw InputError("oracle: ntxent " + where + "'s feature width is not W's");
  }
  if (!shard.first.allFinite() || !shard.second.allFinite()) {
    throw InputError("oracle: ntxent " + where + " is not finite");
  }
}

// Every shard's first views in shard order, then every shard's second views.
NtXentBatch concatenate(const std::vector<NtXentShardInput>& shards) {
  Eigen::Index samples = 0;
  for (const NtXentShardInput& shard : shards) samples += shard.first.rows();
  NtXentBatch batch{RealRows(2 * samples, shards[0].first.cols())};
  Eigen::Index row = 0;
  for (const NtXentShardInput& shard : shards) {
    batch.features.middleRows(row, shard.first.rows()) = shard.first;
    batch.features.middleRows(samples + row, shard.second.rows()) = shard.second;
    row += shard.first.rows();
  }
  return batch;
}

}  // namespace

std::vector<NtXentBatch> ntxent_batches(const NtXentDescription& description) {
  check_parameters(description);
  if (description.micro_steps.empty()) throw InputError("oracle: ntxent case has no micro-steps");
  std::vector<NtXentBatch> batches;
  for (std::size_t m = 0; m < description.micro_steps.size(); ++m) {
    const std::vector<NtXentShardInput>& shards = description.micro_steps[m];
    const std::string micro = "micro-step " + std::to_string(m);
    if (shards.empty()) throw InputError("oracle: ntxent " + micro + " has no shards");
    for (std::size_t d = 0; d < shards.size(); ++d) {
      check_shard(description, shards[d], micro + " shard " + std::to_string(d));
    }
    batches.push_back(concatenate(shards));
  }
  return batches;
}

}  // namespace infonce::oracle
