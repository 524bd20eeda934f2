#include "oracle/clip_objective.hpp"

#include <algorithm>
#include <cmath>

#include "oracle/clip_loss_backward.hpp"
#include "oracle/encoder_backward.hpp"
#include "oracle/logit_magnitude.hpp"

namespace infonce::oracle {
namespace {

// One micro-step's share of a scalar parameter's gradient.
void add_scalar(const ScalarGradient& gradient, Real weight, Real& value, Real& magnitude,
                Real& bound) {
  value += weight * gradient.value;
  magnitude += std::abs(weight) * gradient.magnitude;
  bound += std::abs(weight) * gradient.bound;
}

ClipResult zero_result(const ClipDescription& description) {
  ClipResult result;
  const RealRows& image = description.image_weight;
  const RealRows& text = description.text_weight;
  result.grad_image_weight = RealRows::Zero(image.rows(), image.cols());
  result.grad_image_magnitude = result.grad_image_weight;
  result.grad_image_bound = result.grad_image_weight;
  result.grad_text_weight = RealRows::Zero(text.rows(), text.cols());
  result.grad_text_magnitude = result.grad_text_weight;
  result.grad_text_bound = result.grad_text_weight;
  return result;
}

// One micro-step's loss and gradient, weighted by `weight`, added to `result`.
void add_micro_step(const ClipDescription& description, const ClipBatch& batch, Real weight,
                    ClipResult& result) {
  const RealRows image =
      encode<Real>(description.image_weight, batch.image, description.image_normalize);
  const RealRows text =
      encode<Real>(description.text_weight, batch.text, description.text_normalize);
  const ClipLossAndGradient loss =
      clip_batch_loss_backward(image, text, description.log_scale, description.bias);
  result.loss += weight * loss.loss;
  result.max_abs_logit = std::max(result.max_abs_logit, loss.max_abs_logit);
  result.logit_gradient_bound += std::abs(weight) * loss.logit_gradient_bound;
  result.max_logit_magnitude = std::max(
      result.max_logit_magnitude,
      max_logit_magnitude(
          encoding_magnitude(description.image_weight, batch.image, description.image_normalize),
          encoding_magnitude(description.text_weight, batch.text, description.text_normalize),
          std::exp(description.log_scale), description.bias.value_or(0)));
  result.max_encoding_condition = std::max(
      {result.max_encoding_condition, encoding_condition(description.image_weight, batch.image),
       encoding_condition(description.text_weight, batch.text)});
  add_scalar(loss.log_scale, weight, result.grad_log_scale, result.grad_log_scale_magnitude,
             result.grad_log_scale_bound);
  add_scalar(loss.bias, weight, result.grad_bias, result.grad_bias_magnitude,
             result.grad_bias_bound);
  add_encoder_backward(description.image_weight, batch.image, description.image_normalize,
                       loss.grad_image, weight, result.grad_image_weight,
                       result.grad_image_magnitude);
  add_encoder_backward_bound(description.image_weight, batch.image, description.image_normalize,
                             loss.grad_image_bound, weight, result.grad_image_bound);
  add_encoder_backward(description.text_weight, batch.text, description.text_normalize,
                       loss.grad_text, weight, result.grad_text_weight, result.grad_text_magnitude);
  add_encoder_backward_bound(description.text_weight, batch.text, description.text_normalize,
                             loss.grad_text_bound, weight, result.grad_text_bound);
}

}  // namespace

ClipResult evaluate_clip(const ClipDescription& description) {
  const std::vector<ClipBatch> batches = clip_batches(description);
  const Real weight = clip_micro_step_weight(description);
  ClipResult result = zero_result(description);
  for (const ClipBatch& batch : batches) add_micro_step(description, batch, weight, result);
  return result;
}

}  // namespace infonce::oracle
