#include "oracle/objective.hpp"

#include <algorithm>

#include "oracle/cross_entropy_backward.hpp"
#include "oracle/encoder.hpp"
#include "oracle/encoder_backward.hpp"

namespace infonce::oracle {

Result evaluate(const Description& description) {
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
    add_encoder_backward(description.weight, term.sentences, description.normalize,
                         loss.grad_embeddings, term.weight, result.grad, result.grad_magnitude);
    add_encoder_backward_bound(description.weight, term.sentences, description.normalize,
                               loss.grad_embeddings_bound, term.weight, result.grad_bound);
  }
  return result;
}

}  // namespace infonce::oracle
