// SPEC section 14: the NT-Xent loss of one batch of N samples seen twice. The
// forward alone, for any scalar (long double, or an AutoDiff scalar whose
// derivatives check ntxent_loss_backward).
#pragma once

#include <cstddef>
#include <vector>

#include "base/assert.hpp"
#include "oracle/real.hpp"
#include "oracle/scalar.hpp"
#include "oracle/softmax_cross_entropy.hpp"

namespace infonce::oracle {

// Row k's positive among 2N rows laid out first views, then second views.
inline Eigen::Index ntxent_positive(Eigen::Index k, Eigen::Index samples) {
  return k < samples ? k + samples : k - samples;
}

// Row k's logits: tau * r_k . r_j for every row j; row k itself is kept out
// of the softmax (kept[k] false), every other row of both views is in it.
template <class S>
std::vector<S> ntxent_logit_row(const Rows<S>& rows, Eigen::Index k, const S& tau) {
  std::vector<S> logits;
  logits.reserve(static_cast<std::size_t>(rows.rows()));
  for (Eigen::Index j = 0; j < rows.rows(); ++j) logits.push_back(tau * dot_rows(rows, k, rows, j));
  return logits;
}

// L = (1 / 2N) sum_k -log( exp(z_k,pos(k)) / sum_{j != k} exp(z_kj) ) over
// the 2N rows (2N >= 2: every row has its positive).
template <class S>
S ntxent_batch_loss(const Rows<S>& rows, const S& tau) {
  INFONCE_ASSERT(rows.rows() >= 2 && rows.rows() % 2 == 0);
  const Eigen::Index samples = rows.rows() / 2;
  S total(0);
  for (Eigen::Index k = 0; k < rows.rows(); ++k) {
    std::vector<bool> kept(static_cast<std::size_t>(rows.rows()), true);
    kept[static_cast<std::size_t>(k)] = false;
    total += kept_cross_entropy(ntxent_logit_row(rows, k, tau), kept,
                                static_cast<std::size_t>(ntxent_positive(k, samples)));
  }
  return total / S(static_cast<Real>(rows.rows()));
}

}  // namespace infonce::oracle
