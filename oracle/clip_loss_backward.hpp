// The derived gradient of clip_batch_loss with respect to both towers'
// embeddings, log_scale and the bias (tests/oracle cross-checks it with
// AutoDiff on clip_loss.hpp).
#pragma once

#include <optional>

#include "oracle/real.hpp"
#include "oracle/scalar_gradient.hpp"

namespace infonce::oracle {

struct ClipLossAndGradient {
  Real loss = 0;
  RealRows grad_image, grad_text;              // d loss / d embeddings, N x D each
  RealRows grad_image_bound, grad_text_bound;  // their terms, softmax and onehot apart
  ScalarGradient log_scale, bias;
  Real max_abs_logit = 0;
  Real logit_gradient_bound = 0;  // sum over the logits of (softmax + onehot) / (2N)
};

// With z = c a_i . b_j + bias (c = exp(log_scale)) in both directions, and
// each direction's rows weighted 1 / (2N): d L / d z = (softmax - onehot) / (2N);
// d z / d a_i = c b_j, d z / d b_j = c a_i, d z / d log_scale = c a_i . b_j,
// d z / d bias = 1. The bias's terms add up to 0 row by row (softmax sums to 1).
ClipLossAndGradient clip_batch_loss_backward(const RealRows& image, const RealRows& text,
                                             Real log_scale, std::optional<Real> bias);

}  // namespace infonce::oracle
