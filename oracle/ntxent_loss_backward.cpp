#include "oracle/ntxent_loss_backward.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "base/assert.hpp"
#include "oracle/ntxent_loss.hpp"
#include "oracle/scalar.hpp"
#include "oracle/softmax_cross_entropy.hpp"

namespace infonce::oracle {
namespace {

// Buffers reused from row to row.
struct Scratch {
  std::vector<Real> similarities, logits, probabilities;
  std::vector<bool> kept;
};

// Adds row k's loss and gradient, each term weighted by `weight` (1 / (2N)).
void add_row(const RealRows& rows, Eigen::Index k, Real tau, Real weight, Scratch& scratch,
             NtXentLossAndGradient& out) {
  scratch.similarities.clear();
  scratch.logits.clear();
  for (Eigen::Index j = 0; j < rows.rows(); ++j) {
    const Real similarity = dot_rows(rows, k, rows, j);
    scratch.similarities.push_back(similarity);
    scratch.logits.push_back(tau * similarity);
    if (j != k) out.max_abs_logit = std::max(out.max_abs_logit, std::abs(scratch.logits.back()));
  }
  scratch.kept.assign(scratch.logits.size(), true);
  scratch.kept[static_cast<std::size_t>(k)] = false;
  const Real log_sum = kept_softmax(scratch.logits, scratch.kept, scratch.probabilities);
  const auto target = static_cast<std::size_t>(ntxent_positive(k, rows.rows() / 2));
  out.loss += weight * (log_sum - scratch.logits[target]);
  for (Eigen::Index j = 0; j < rows.rows(); ++j) {
    if (j == k) continue;  // not in the softmax: no derivative
    const auto e = static_cast<std::size_t>(j);
    const Real softmax = scratch.probabilities[e];
    const Real d_logit = weight * (e == target ? softmax - 1 : softmax);
    const Real d_logit_bound = weight * (e == target ? softmax + 1 : softmax);
    out.grad_rows.row(k) += d_logit * tau * rows.row(j);
    out.grad_rows.row(j) += d_logit * tau * rows.row(k);
    out.grad_rows_bound.row(k) += d_logit_bound * std::abs(tau) * rows.row(j).cwiseAbs();
    out.grad_rows_bound.row(j) += d_logit_bound * std::abs(tau) * rows.row(k).cwiseAbs();
    const Real similarity = scratch.similarities[e];
    out.inverse_temperature.value += d_logit * similarity;
    out.inverse_temperature.magnitude += std::abs(d_logit * similarity);
    out.inverse_temperature.bound += d_logit_bound * std::abs(similarity);
  }
}

}  // namespace

NtXentLossAndGradient ntxent_batch_loss_backward(const RealRows& rows, Real tau) {
  INFONCE_ASSERT(rows.rows() >= 2 && rows.rows() % 2 == 0);
  NtXentLossAndGradient out;
  out.grad_rows = RealRows::Zero(rows.rows(), rows.cols());
  out.grad_rows_bound = out.grad_rows;
  const Real weight = 1 / static_cast<Real>(rows.rows());  // the mean over 2N rows
  Scratch scratch;
  for (Eigen::Index k = 0; k < rows.rows(); ++k) add_row(rows, k, tau, weight, scratch, out);
  return out;
}

}  // namespace infonce::oracle
