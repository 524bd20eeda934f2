#include "oracle/objective.hpp"

#include <algorithm>
#include <cmath>

#include "base/error.hpp"
#include "oracle/cross_entropy_backward.hpp"
#include "oracle/encoder.hpp"
#include "oracle/encoder_backward.hpp"

namespace infonce::oracle {
namespace {

// tau = 1 / T must be a finite positive parameter for its gradient to exist.
void require_valid_inverse_temperature(const LossSettings& settings) {
  const Real tau = 1 / settings.temperature;
  if (!std::isfinite(tau) || !(tau > 0)) {
    throw InputError("oracle: a learnable inverse temperature needs a finite tau > 0");
  }
}

// One loss term's share of d objective / d tau: the term's weight in the
// objective (1/A, 1/P...) times its loss's own dL/dtau.
void add_inverse_temperature_gradient(const LossAndGradient& loss, Real weight, Result& result) {
  result.grad_inverse_temperature += weight * loss.grad_inverse_temperature;
  result.grad_inverse_temperature_magnitude +=
      std::abs(weight) * loss.grad_inverse_temperature_magnitude;
  result.grad_inverse_temperature_bound += std::abs(weight) * loss.grad_inverse_temperature_bound;
}

}  // namespace

Result evaluate(const Description& description) {
  if (description.learnable_temperature) require_valid_inverse_temperature(description.loss);
  const std::vector<LossTerm> terms = objective_terms(description);
  const std::size_t shards =
      description.micro_steps.empty() ? 0 : description.micro_steps[0].size();
  Result result;
  result.shard_losses.assign(shards, 0);
  result.grad = RealRows::Zero(description.weight.rows(), description.weight.cols());
  result.grad_magnitude = result.grad;
  result.grad_bound = result.grad;
  for (const LossTerm& term : terms) {
    const RealRows embeddings =
        encode<Real>(description.weight, term.sentences, description.normalize);
    const LossAndGradient loss =
        mean_cross_entropy_backward(embeddings, term.rows, description.loss, term.apply_mask);
    result.loss += term.weight * loss.loss;
    result.max_abs_logit = std::max(result.max_abs_logit, loss.max_abs_logit);
    result.max_encoding_condition = std::max(
        result.max_encoding_condition, encoding_condition(description.weight, term.sentences));
    result.min_mask_gap = std::min(result.min_mask_gap, loss.min_mask_gap);
    for (std::size_t d = 0; d < shards; ++d) {
      if (term.shard < 0 || static_cast<std::size_t>(term.shard) == d) {
        result.shard_losses[d] += term.report_weight * loss.loss;
      }
    }
    if (description.learnable_temperature)
      add_inverse_temperature_gradient(loss, term.weight, result);
    add_encoder_backward(description.weight, term.sentences, description.normalize,
                         loss.grad_embeddings, term.weight, result.grad, result.grad_magnitude);
    add_encoder_backward_bound(description.weight, term.sentences, description.normalize,
                               loss.grad_embeddings_bound, term.weight, result.grad_bound);
  }
  return result;
}

}  // namespace infonce::oracle
