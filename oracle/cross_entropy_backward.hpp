// The derived gradient of mean_cross_entropy with respect to the embeddings
// (tests/oracle cross-checks it with AutoDiff on cross_entropy.hpp).
#pragma once

#include <limits>

#include <vector>

#include "oracle/description.hpp"
#include "oracle/logit_rows.hpp"
#include "oracle/real.hpp"

namespace infonce::oracle {

struct LossAndGradient {
  Real loss = 0;
  RealRows grad_embeddings;  // d loss / dE, one row per sentence
  Real max_abs_logit = 0;    // over kept entries: the loss's condition
  Real min_mask_gap = std::numeric_limits<Real>::infinity();  // Result::min_mask_gap
  // dL/dE with every term taken in absolute value (softmax and the target's
  // -1 added, not cancelled): the scale rounding in softmax - onehot perturbs.
  RealRows grad_embeddings_bound;
  // dL/dtau for logits z = tau * s (tau = 1 / T): the sum over kept entries
  // of dL/dz * s, the sum of those terms' |.|, and their bound with
  // softmax - onehot taken apart. The caller keeps them when tau is learnable.
  Real grad_inverse_temperature = 0;
  Real grad_inverse_temperature_magnitude = 0;
  Real grad_inverse_temperature_bound = 0;
};

// d CE / d logit_e = softmax_e - [e is the kept target]; masked entries carry
// nothing (the mask's threshold is a constant); d logit / d sim = 1 / T and
// d logit / d tau = sim; d (a . b) = b da + a db.
LossAndGradient mean_cross_entropy_backward(const RealRows& embeddings,
                                            const std::vector<LogitRow>& rows,
                                            const LossSettings& settings, bool apply_mask);

}  // namespace infonce::oracle
