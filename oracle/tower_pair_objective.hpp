// What the oracle's two-tower objectives share (oracle/clip_objective.cpp,
// oracle/siglip_objective.cpp): a zero result shaped like the towers, and a
// micro-step's loss and gradient through both towers added to it. The family
// gives only its loss and its gradient with respect to the embeddings. The
// oracle's own helper (it imports base/ alone), not loss/'s.
#pragma once

#include <algorithm>
#include <cmath>
#include <optional>

#include "oracle/clip_batch.hpp"
#include "oracle/encoder.hpp"
#include "oracle/encoder_backward.hpp"
#include "oracle/logit_magnitude.hpp"
#include "oracle/scalar_gradient.hpp"

namespace infonce::oracle {

// One micro-step's share of a scalar parameter's gradient.
inline void add_scalar_gradient(const ScalarGradient& gradient, Real weight, Real& value,
                                Real& magnitude, Real& bound) {
  value += weight * gradient.value;
  magnitude += std::abs(weight) * gradient.magnitude;
  bound += std::abs(weight) * gradient.bound;
}

// A family's logit bias: SigLIP's always, CLIP's where set (0 otherwise).
inline Real bias_or_zero(Real bias) {
  return bias;
}
inline Real bias_or_zero(const std::optional<Real>& bias) {
  return bias.value_or(0);
}

// Result: ClipResult or SigLipResult (the same fields); Description: theirs.
template <class Result, class Description>
Result zero_tower_pair_result(const Description& description) {
  Result result;
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

// One micro-step's loss and gradient, weighted by `weight`, added to
// `result`; `loss_backward(image, text)` is the family's loss of the encoded
// rows and its gradient (clip_batch_loss_backward, siglip_batch_loss_backward).
template <class Description, class Result, class LossBackward>
void add_tower_pair_micro_step(const Description& description, const ClipBatch& batch, Real weight,
                               const LossBackward& loss_backward, Result& result) {
  const RealRows image =
      encode<Real>(description.image_weight, batch.image, description.image_normalize);
  const RealRows text =
      encode<Real>(description.text_weight, batch.text, description.text_normalize);
  const auto loss = loss_backward(image, text);
  result.loss += weight * loss.loss;
  result.max_abs_logit = std::max(result.max_abs_logit, loss.max_abs_logit);
  result.logit_gradient_bound += std::abs(weight) * loss.logit_gradient_bound;
  result.max_logit_magnitude = std::max(
      result.max_logit_magnitude,
      max_logit_magnitude(
          encoding_magnitude(description.image_weight, batch.image, description.image_normalize),
          encoding_magnitude(description.text_weight, batch.text, description.text_normalize),
          std::exp(description.log_scale), bias_or_zero(description.bias)));
  result.max_encoding_condition = std::max(
      {result.max_encoding_condition, encoding_condition(description.image_weight, batch.image),
       encoding_condition(description.text_weight, batch.text)});
  add_scalar_gradient(loss.log_scale, weight, result.grad_log_scale,
                      result.grad_log_scale_magnitude, result.grad_log_scale_bound);
  add_scalar_gradient(loss.bias, weight, result.grad_bias, result.grad_bias_magnitude,
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

}  // namespace infonce::oracle
