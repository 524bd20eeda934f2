// SPEC section 15: the SigLIP loss of one batch of N pairs, written from the
// definition: -(1/N) sum_i sum_j log sigmoid(y_ij z_ij). The forward alone,
// for any scalar (long double, or an AutoDiff scalar whose derivatives check
// siglip_loss_backward).
#pragma once

#include <cmath>

#include "base/assert.hpp"
#include "oracle/real.hpp"
#include "oracle/scalar.hpp"

namespace infonce::oracle {

// -log sigmoid(x) = log(1 + exp(-x)), evaluated where exp cannot overflow.
template <class S>
S minus_log_sigmoid(const S& x) {
  using std::exp;
  using std::log;
  if (x >= S(0)) return log(S(1) + exp(-x));
  return -x + log(S(1) + exp(x));
}

// z_ij = exp(log_scale) a_i . b_j + bias; y_ij = 1 on the diagonal, else -1.
template <class S>
S siglip_batch_loss(const Rows<S>& image, const Rows<S>& text, const S& log_scale, const S& bias) {
  using std::exp;
  INFONCE_ASSERT(image.rows() == text.rows() && image.rows() > 0);
  const S scale = exp(log_scale);
  S total(0);
  for (Eigen::Index i = 0; i < image.rows(); ++i) {
    for (Eigen::Index j = 0; j < text.rows(); ++j) {
      const S logit = scale * dot_rows(image, i, text, j) + bias;
      total += minus_log_sigmoid(i == j ? logit : S(-logit));
    }
  }
  return total / S(static_cast<Real>(image.rows()));
}

}  // namespace infonce::oracle
