// Small random oracle descriptions over every setting, from an explicit seed,
// for the tests that compare two computations of the oracle (no expected
// values come from here).
#pragma once

#include <cstdint>

#include "base/rng.hpp"
#include "oracle/description.hpp"

namespace infonce::oracle::testing {

inline Real normal(Rng& rng) { return static_cast<Real>(rng.normal()); }

inline RealRows random_rows(Rng& rng, Eigen::Index rows, Eigen::Index cols) {
  RealRows m(rows, cols);
  for (Eigen::Index r = 0; r < rows; ++r) {
    for (Eigen::Index c = 0; c < cols; ++c) m(r, c) = normal(rng);
  }
  return m;
}

// One shard: `groups` groups with 0..3 negatives (>= 1 under hard negatives).
// Appends the padding draws its groups need to `draws`.
inline ShardInput random_shard(Rng& rng, std::int32_t groups, Eigen::Index features,
                               const LossSettings& settings, Draws& draws) {
  ShardInput shard;
  std::int32_t sentences = 0;
  for (std::int32_t g = 0; g < groups; ++g) {
    const auto k = static_cast<std::int32_t>(rng.between(settings.hard_negatives ? 1 : 0, 3));
    shard.labels.push_back(1);
    shard.labels.insert(shard.labels.end(), static_cast<std::size_t>(k), 0);
    sentences += 2 + k;
    if (settings.hard_negatives) {
      for (std::int32_t n = k; n < *settings.hard_negatives; ++n) {
        draws.push_back(static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(k))));
      }
    }
  }
  shard.sentences = random_rows(rng, sentences, features);
  return shard;
}

inline Description random_description(std::uint64_t seed) {
  Rng rng(seed);
  Description d;
  LossSettings& s = d.loss;
  s.temperature = 0.05L + static_cast<Real>(rng.unit());
  s.use_batch = rng.below(4) != 0;
  if (rng.below(2) == 0) s.hard_negatives = static_cast<std::int32_t>(rng.between(1, 3));
  s.padding = rng.below(2) == 0 ? PaddingRow::legacy : PaddingRow::fixed;
  s.mask_fake_negative = rng.below(2) == 0;
  s.fake_neg_margin = static_cast<Real>(rng.unit()) * 0.5L;  // >= 0: the target stays
  s.include_qq = rng.below(2) == 0;
  s.include_dd = rng.below(2) == 0;
  const Eigen::Index features = rng.between(1, 4);
  const Eigen::Index dim = rng.between(1, 4);
  d.weight = random_rows(rng, dim, features);
  d.normalize = rng.below(3) != 0;
  d.accumulation_normalize = rng.below(2) == 0;
  d.sum_over_shards = !s.use_batch && rng.below(2) == 0;
  const auto micro_steps = rng.between(1, 3);
  const auto shards = rng.between(1, 3);
  for (std::int64_t m = 0; m < micro_steps; ++m) {
    auto& micro = d.micro_steps.emplace_back();
    auto& streams = d.draws.emplace_back(static_cast<std::size_t>(shards));
    for (std::int64_t p = 0; p < shards; ++p) {
      // use_batch pads the gathered batch from stream 0, in DP order.
      Draws& stream = streams[s.use_batch ? 0 : static_cast<std::size_t>(p)];
      const auto groups = static_cast<std::int32_t>(rng.between(s.use_batch && p > 0 ? 0 : 1, 3));
      micro.push_back(random_shard(rng, groups, features, s, stream));
    }
  }
  return d;
}

}  // namespace infonce::oracle::testing
