#include "oracle/ntxent_objective.hpp"

#include <algorithm>
#include <cmath>

#include "oracle/encoder_backward.hpp"
#include "oracle/ntxent_loss_backward.hpp"

namespace infonce::oracle {
namespace {

NtXentResult zero_result(const NtXentDescription& description) {
  NtXentResult result;
  const RealRows& weight = description.weight;
  result.grad_weight = RealRows::Zero(weight.rows(), weight.cols());
  result.grad_weight_magnitude = result.grad_weight;
  result.grad_weight_bound = result.grad_weight;
  return result;
}

// One micro-step's loss and gradient, weighted by `weight`, added to `result`.
void add_micro_step(const NtXentDescription& description, const NtXentBatch& batch, Real weight,
                    NtXentResult& result) {
  const RealRows rows = encode<Real>(description.weight, batch.features, description.normalize);
  const NtXentLossAndGradient loss = ntxent_batch_loss_backward(rows, 1 / description.temperature);
  result.loss += weight * loss.loss;
  result.max_abs_logit = std::max(result.max_abs_logit, loss.max_abs_logit);
  result.max_encoding_condition = std::max(result.max_encoding_condition,
                                           encoding_condition(description.weight, batch.features));
  result.grad_inverse_temperature += weight * loss.inverse_temperature.value;
  result.grad_inverse_temperature_magnitude +=
      std::abs(weight) * loss.inverse_temperature.magnitude;
  result.grad_inverse_temperature_bound += std::abs(weight) * loss.inverse_temperature.bound;
  add_encoder_backward(description.weight, batch.features, description.normalize, loss.grad_rows,
                       weight, result.grad_weight, result.grad_weight_magnitude);
  add_encoder_backward_bound(description.weight, batch.features, description.normalize,
                             loss.grad_rows_bound, weight, result.grad_weight_bound);
}

}  // namespace

NtXentResult evaluate_ntxent(const NtXentDescription& description) {
  const std::vector<NtXentBatch> batches = ntxent_batches(description);
  const Real weight = ntxent_micro_step_weight(description);
  NtXentResult result = zero_result(description);
  for (const NtXentBatch& batch : batches) add_micro_step(description, batch, weight, result);
  return result;
}

}  // namespace infonce::oracle
