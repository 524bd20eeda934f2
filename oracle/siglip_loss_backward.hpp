// The derived gradient of siglip_batch_loss with respect to both towers'
// embeddings, log_scale and the bias (tests/oracle cross-checks it with
// AutoDiff on siglip_loss.hpp).
#pragma once

#include "oracle/real.hpp"
#include "oracle/scalar_gradient.hpp"

namespace infonce::oracle {

struct SigLipLossAndGradient {
  Real loss = 0;
  RealRows grad_image, grad_text;              // d loss / d embeddings, N x D each
  RealRows grad_image_bound, grad_text_bound;  // their terms with |d loss / d z| at 1 / N
  ScalarGradient log_scale, bias;
  Real max_abs_logit = 0;
  Real logit_gradient_bound = 0;  // sum over the logits of 1 / N (|d loss / d z| at most)
};

// With z = c a_i . b_j + bias (c = exp(log_scale)) and t = y z:
// d/dt [-log sigmoid(t)] = -sigmoid(-t), so d L / d z_ij = -y_ij sigmoid(-y_ij z_ij) / N;
// d z / d a_i = c b_j, d z / d b_j = c a_i, d z / d log_scale = c a_i . b_j,
// d z / d bias = 1.
SigLipLossAndGradient siglip_batch_loss_backward(const RealRows& image, const RealRows& text,
                                                 Real log_scale, Real bias);

}  // namespace infonce::oracle
