// Small random NT-Xent descriptions over every setting, from an explicit seed,
// for the tests that compare two computations of the oracle (no expected
// values come from here).
#pragma once

#include <cstdint>

#include "base/rng.hpp"
#include "oracle/ntxent_description.hpp"
#include "tests/oracle/random_clip_description.hpp"  // uniform
#include "tests/oracle/random_description.hpp"       // random_rows

namespace infonce::oracle::testing {

// 1..3 micro-steps of 1..3 shards of 1..3 samples (shards of one micro-step
// may differ); D, F in 1..4; normalised two times in three; T in [0.05, 1];
// the inverse temperature learnable half the time. A second view is the first
// plus noise half the time, an unrelated draw otherwise.
inline NtXentDescription random_ntxent_description(std::uint64_t seed) {
  Rng rng(seed);
  NtXentDescription d;
  const Eigen::Index dim = rng.between(1, 4);
  const Eigen::Index features = rng.between(1, 4);
  d.weight = random_rows(rng, dim, features);
  d.normalize = rng.below(3) != 0;
  d.temperature = uniform(rng, 0.05L, 1);
  d.learnable_temperature = rng.below(2) == 0;
  d.accumulation_normalize = rng.below(2) == 0;
  const auto micro_steps = rng.between(1, 3);
  const auto shards = rng.between(1, 3);
  for (std::int64_t m = 0; m < micro_steps; ++m) {
    auto& micro = d.micro_steps.emplace_back();
    for (std::int64_t p = 0; p < shards; ++p) {
      const Eigen::Index samples = rng.between(1, 3);
      NtXentShardInput shard{random_rows(rng, samples, features), RealRows()};
      shard.second = rng.below(2) == 0
                         ? RealRows(shard.first + 0.3L * random_rows(rng, samples, features))
                         : random_rows(rng, samples, features);
      micro.push_back(std::move(shard));
    }
  }
  return d;
}

}  // namespace infonce::oracle::testing
