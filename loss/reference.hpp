// The full-batch reference of MODEL.md section 4: one process, no collectives.
// For each micro-step the loss over the union of every data shard's
// micro-batch (in shard order), divided by A when GA normalisation is on,
// summed over micro-steps; the gradient by exact differentiation.
// Without use_batch the objective is the mean (or, under a summing
// reduction, the sum) over shards of each shard's own mean loss.
#pragma once

#include <cstdint>
#include <vector>

#include "loss/matrix.hpp"
#include "loss/padding.hpp"
#include "loss/settings.hpp"

namespace infonce::loss {

// One data shard's micro-batch: groups [q, p, n_1..n_k] laid end to end.
struct ShardBatch {
  Matrix<double> features;                    // rows x F
  std::vector<std::int32_t> negative_counts;  // k_g per group
};

struct ReferenceProblem {
  LossSettings settings;
  Matrix<double> weight;  // D x F
  bool normalize = true;
  bool accumulation_normalize = true;
  // The inverse temperature 1 / settings.temperature is a parameter: the
  // result carries d objective / d(1/T) (loss/learnable_temperature.hpp).
  bool learnable_temperature = false;
  bool sum_over_shards = false;                        // use_batch = false under a sum reduction
  std::vector<std::vector<ShardBatch>> micro_batches;  // [micro][shard]
};

template <class Scalar>
struct ReferenceResult {
  Scalar loss;  // the objective
  // use_batch = false: each shard's own value (summed over micro-steps);
  // use_batch = true: the global value, once per shard (every rank reports it).
  std::vector<Scalar> shard_losses;
  Matrix<Scalar> grad;  // d objective / dW
  // Per entry of grad, the sum of the absolute values of the terms it adds up
  // (encode_backward_magnitude): the scale of any reordering's rounding error.
  Matrix<Scalar> grad_magnitude;
  // The direct parameters' gradients (learnable_temperature: d objective /
  // d(1/T)) and the sums of |terms| of each; empty without any.
  std::vector<Scalar> direct_grad;
  std::vector<Scalar> direct_magnitude;
};

// Padding streams: with use_batch, stream 0 pads the union; without, stream d pads shard d.
template <class Scalar>
ReferenceResult<Scalar> compute_reference(const ReferenceProblem& problem, PaddingPlan& padding);

}  // namespace infonce::loss
