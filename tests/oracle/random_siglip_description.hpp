// Small random SigLIP descriptions over every setting, from an explicit seed,
// for the tests that compare two computations of the oracle (no expected
// values come from here).
#pragma once

#include <cstdint>

#include "base/rng.hpp"
#include "oracle/siglip_description.hpp"
#include "tests/oracle/random_clip_description.hpp"
#include "tests/oracle/random_description.hpp"

namespace infonce::oracle::testing {

// 1..3 micro-steps of 1..3 shards of 1..3 pairs; D, F_image, F_text in 1..4;
// each tower normalised two times in three; log_scale in [-1, 2.7] (SigLIP's
// initial log 10 is 2.3); bias in [-12, 4] (its initial value is -10).
inline SigLipDescription random_siglip_description(std::uint64_t seed) {
  Rng rng(seed ^ 0x5161a11ULL);
  SigLipDescription d;
  const Eigen::Index dim = rng.between(1, 4);
  const Eigen::Index image_features = rng.between(1, 4);
  const Eigen::Index text_features = rng.between(1, 4);
  d.image_weight = random_rows(rng, dim, image_features);
  d.text_weight = random_rows(rng, dim, text_features);
  d.image_normalize = rng.below(3) != 0;
  d.text_normalize = rng.below(3) != 0;
  d.log_scale = uniform(rng, -1, 2.7L);
  d.bias = uniform(rng, -12, 4);
  d.accumulation_normalize = rng.below(2) == 0;
  const auto micro_steps = rng.between(1, 3);
  const auto shards = rng.between(1, 3);
  for (std::int64_t m = 0; m < micro_steps; ++m) {
    auto& micro = d.micro_steps.emplace_back();
    for (std::int64_t p = 0; p < shards; ++p) {
      const Eigen::Index pairs = rng.between(1, 3);
      micro.push_back(
          {random_rows(rng, pairs, image_features), random_rows(rng, pairs, text_features)});
    }
  }
  return d;
}

}  // namespace infonce::oracle::testing
