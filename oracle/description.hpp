// The plain description of one case the oracle evaluates: feature rows,
// labels, settings, the weight and the padding draws the step used. It holds
// numbers and flags only (no type of loss/, step/ or casefile/), so that the
// oracle reads a case the way another framework would.
#pragma once

#include <limits>

#include <cstdint>
#include <optional>
#include <vector>

#include "oracle/real.hpp"

namespace infonce::oracle {

// Which row of a short group `[q, p, n_1..n_k]` a draw j takes (SPEC section 2).
enum class PaddingRow {
  legacy,  // row j + 1: the positive when j = 0
  fixed,   // row j + 2: negatives only
};

// SPEC section 2's settings (same defaults as the trainer).
struct LossSettings {
  Real temperature = 0.1L;
  bool use_batch = true;
  std::optional<std::int32_t> hard_negatives;
  PaddingRow padding = PaddingRow::legacy;
  bool mask_fake_negative = false;
  Real fake_neg_margin = 0.1L;
  bool include_qq = false;
  bool include_dd = false;
};

// One DP shard's micro-batch as the trainer receives it: the sentence list
// (each row one feature vector x of length F) and the label list (SPEC
// section 1: 1 for a positive, 0 for a negative, nothing for a query).
struct ShardInput {
  RealRows sentences;
  std::vector<std::int32_t> labels;
};

// The indices j one padding generator drew, in order.
using Draws = std::vector<std::int32_t>;

struct Description {
  LossSettings loss;
  RealRows weight;  // W, D x F
  bool normalize = true;
  bool accumulation_normalize = true;  // divide each micro-step's loss by A
  // use_batch = false under a summing reduction: the objective is the sum of
  // the shards' losses instead of their mean (SPEC sections 3 and 4).
  bool sum_over_shards = false;
  // SPEC section 10: the inverse temperature tau = 1 / loss.temperature is a
  // parameter (logits tau * s), and Result reports d objective / d tau.
  bool learnable_temperature = false;
  std::vector<std::vector<ShardInput>> micro_steps;  // [micro][dp shard], A x P
  // [micro][stream]: with use_batch stream 0 pads the whole gathered batch;
  // without, stream d pads shard d. May be empty when hard_negatives is unset.
  std::vector<std::vector<Draws>> draws;
};

struct Result {
  Real loss = 0;  // the objective of SPEC section 4
  // use_batch: the global value, once per shard; otherwise each shard's own
  // loss summed over micro-steps (what that shard's ranks report).
  std::vector<Real> shard_losses;
  RealRows grad;  // d loss / dW
  // Per entry of grad, the sum of |terms| it adds up: the scale at which a
  // different summation order perturbs it.
  RealRows grad_magnitude;
  // The largest |logit| of any kept entry: rounding a logit z perturbs the
  // loss by about u |z| (u: the unit roundoff), whatever the loss's size.
  Real max_abs_logit = 0;
  // The largest encoding_condition (encoder.hpp) of any encoded row.
  Real max_encoding_condition = 1;
  // The fake-negative mask's closest call: the smallest |s - h| over the
  // compared entries, relative to the larger of |s| + |h| and the scale at
  // which s and h round (sum_k |a_k b_k| of each, plus |margin|; +inf
  // without the mask). Below
  // the rounding of the code under test, its decision and the oracle's may
  // differ, and both are right for their precision.
  Real min_mask_gap = std::numeric_limits<Real>::infinity();
  // A bound on the terms of grad with softmax - onehot taken apart: the scale
  // at which rounding the logits perturbs it (cancellation included).
  RealRows grad_bound;
  // d objective / d tau with learnable_temperature (0 otherwise), summed from
  // the kept logit entries, dL/dz * s each; the sum of the |terms| it adds up
  // (its rounding scale); and its terms' bound with softmax - onehot taken
  // apart, as grad_bound.
  Real grad_inverse_temperature = 0;
  Real grad_inverse_temperature_magnitude = 0;
  Real grad_inverse_temperature_bound = 0;
};

}  // namespace infonce::oracle
