// The derived gradient of ntxent_batch_loss with respect to the 2N rows and
// the inverse temperature (tests/oracle cross-checks it with AutoDiff on
// ntxent_loss.hpp).
#pragma once

#include "oracle/real.hpp"
#include "oracle/scalar_gradient.hpp"

namespace infonce::oracle {

struct NtXentLossAndGradient {
  Real loss = 0;
  RealRows grad_rows;        // d loss / d rows, 2N x D
  RealRows grad_rows_bound;  // its terms, softmax and onehot apart
  ScalarGradient inverse_temperature;
  Real max_abs_logit = 0;
};

// With z_kj = tau r_k . r_j and every row weighted 1 / (2N):
// d L / d z_kj = (softmax_kj - [j = pos(k)]) / (2N) for j != k; z_kj depends on
// both r_k and r_j (d z_kj / d r_k = tau r_j, d z_kj / d r_j = tau r_k; a row
// is a query once and a key 2N - 1 times), d z_kj / d tau = r_k . r_j.
NtXentLossAndGradient ntxent_batch_loss_backward(const RealRows& rows, Real tau);

}  // namespace infonce::oracle
