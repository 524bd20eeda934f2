// What each strategy point should give, derived on its own (issue 30): the
// strategy campaign judges the rank program against these predictions, and a
// slip shared by the prediction and the step (say in the backward scale both
// called) would cancel out. So this module shares no function with the rank
// program: it includes only base/ and the strategy's value types
// (casefile/strategy_value.hpp), and tests/check_includes.cmake (ctest prediction.include_check)
// fails on anything else.
//
// The derivation counts, in integers, the copies of the full-batch gradient
// that reach a parameter (docs/strategies.md): the step's gradient is
//   (signal copies x live copies) / reduction divisor  x  the reference's,
// each factor written out below from the strategy's definition, not from
// step/strategy.hpp's functions.
#pragma once

#include <cstdint>

#include "casefile/strategy_value.hpp"

namespace infonce::prediction {

// The step as the prediction sees it.
struct StepShape {
  std::int32_t dp = 1;        // P
  std::int32_t world = 1;     // W, a multiple of P
  bool equal_batches = true;  // every DP shard has the same number of queries (per micro-step)
  bool use_batch = true;      // false: no gather, each rank its own loss
  // Some row of the loss meets rows of its own side (InfoNCE's qq or dd
  // block) or groups are padded with random rows: under a world gather a row
  // then meets its own replica copy, or the copies are padded differently.
  bool copies_interact = false;
};

enum class Parameters { encoders, direct };

enum class Outcome {
  exact_multiple,  // the step's gradient is `numerator / denominator` x the reference's
  dropped_terms,   // a local loss over a detached gather loses cross-rank terms: no multiple
  unequal_batches,  // a local loss weights queries by 1/n_d, the reference by 1/N: no multiple
  replica_copies    // a world gather's copies of a shard are not a pure repetition: no multiple
};

struct Expected {
  Outcome outcome = Outcome::exact_multiple;
  std::int64_t numerator = 1;  // exact_multiple: the ratio as an integer fraction
  std::int64_t denominator = 1;
  // The multiple holds only because every shard has the same number of
  // queries (a local loss).
  bool needs_equal_batches = false;

  double ratio() const {
    return static_cast<double>(numerator) / static_cast<double>(denominator);
  }
};

Expected expected_gradient(const Strategy& strategy, Parameters parameters,
                           const StepShape& shape);

}  // namespace infonce::prediction
