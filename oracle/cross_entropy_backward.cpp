#include "oracle/cross_entropy_backward.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/assert.hpp"
#include "oracle/cross_entropy.hpp"

namespace infonce::oracle {
namespace {

// Buffers reused from row to row (a campaign case has thousands of rows).
struct Scratch {
  std::vector<Real> similarities, logits, probabilities;
  std::vector<bool> kept;
};

// The scale at which a code under test rounds the similarity of `entry`:
// sum_k |a_k b_k| (at least |a . b|; near-orthogonal rows round at the size
// of their terms, not of their small dot product).
Real rounding_scale(const RealRows& embeddings, const Entry& entry) {
  Real sum = 0;
  for (Eigen::Index k = 0; k < embeddings.cols(); ++k) {
    sum += std::abs(embeddings(entry.left, k) * embeddings(entry.right, k));
  }
  return sum;
}

// The closest mask decision of the row, relative (Result::min_mask_gap): to
// the rounding scale of both similarities compared and the margin, so that a
// gap below the code under test's unit roundoff is a tie for its precision
// however small the similarities are.
void note_mask_gap(const RealRows& embeddings, const LogitRow& row,
                   const std::vector<Real>& similarities, const LossSettings& settings,
                   Real& min_gap) {
  const auto target = static_cast<std::size_t>(row.target);
  const Real threshold = similarities[target] + settings.fake_neg_margin;
  const Real threshold_scale =
      rounding_scale(embeddings, row.entries[target]) + std::abs(settings.fake_neg_margin);
  for (std::size_t e = 0; e < row.entries.size(); ++e) {
    if (row.entries[e].block == Block::dd) continue;
    // The target against its own threshold: s_t > s_t + margin is decided
    // exactly at margin 0, and otherwise only where s_t + margin does not
    // round to s_t (a negative margin masks the target: |margin| is the gap).
    if (e == target && settings.fake_neg_margin == 0) continue;
    const Real scale = std::max(std::abs(similarities[e]) + std::abs(threshold),
                                rounding_scale(embeddings, row.entries[e]) + threshold_scale);
    if (scale == 0) continue;  // 0 > 0 is decided exactly either way
    min_gap = std::min(min_gap, std::abs(similarities[e] - threshold) / scale);
  }
}

// One kept entry's share of dL/dtau: dL/dz * dz/dtau, with z = tau * s.
void add_inverse_temperature_term(Real d_logit, Real d_logit_bound, Real similarity,
                                  LossAndGradient& out) {
  const Real term = d_logit * similarity;
  out.grad_inverse_temperature += term;
  out.grad_inverse_temperature_magnitude += std::abs(term);
  out.grad_inverse_temperature_bound += d_logit_bound * std::abs(similarity);
}

// Adds one row's loss and its gradient, scaled by `weight`, to `out`.
void add_row(const RealRows& embeddings, const LogitRow& row, const LossSettings& settings,
             bool apply_mask, Real weight, Scratch& scratch, LossAndGradient& out) {
  std::vector<Real>& similarities = scratch.similarities;
  similarities.clear();
  for (const Entry& entry : row.entries) {
    similarities.push_back(dot_rows(embeddings, entry.left, embeddings, entry.right));
  }
  mark_kept_entries(row, similarities, settings, apply_mask, scratch.kept);
  if (apply_mask) note_mask_gap(embeddings, row, similarities, settings, out.min_mask_gap);
  const std::vector<bool>& kept = scratch.kept;
  require_some_kept(kept);
  const Real inverse_t = 1 / settings.temperature;
  scratch.logits.clear();
  for (std::size_t e = 0; e < similarities.size(); ++e) {
    scratch.logits.push_back(similarities[e] * inverse_t);
    if (kept[e]) out.max_abs_logit = std::max(out.max_abs_logit, std::abs(scratch.logits[e]));
  }
  const Real log_sum = kept_softmax(scratch.logits, kept, scratch.probabilities);
  const auto target = static_cast<std::size_t>(row.target);
  out.loss += weight * (kept[target] ? log_sum - scratch.logits[target]
                                     : std::numeric_limits<Real>::infinity());
  for (std::size_t e = 0; e < similarities.size(); ++e) {
    if (!kept[e]) continue;
    const Real softmax = scratch.probabilities[e];
    const Real d_logit = e == target ? softmax - 1 : softmax;  // target: only when kept
    const Real d_logit_bound = e == target ? softmax + 1 : softmax;
    const Real d_similarity = weight * d_logit * inverse_t;
    const Real d_bound = weight * d_logit_bound * inverse_t;
    add_inverse_temperature_term(weight * d_logit, weight * d_logit_bound, similarities[e], out);
    const Entry& entry = row.entries[e];
    out.grad_embeddings.row(entry.left) += d_similarity * embeddings.row(entry.right);
    out.grad_embeddings.row(entry.right) += d_similarity * embeddings.row(entry.left);
    out.grad_embeddings_bound.row(entry.left) += d_bound * embeddings.row(entry.right).cwiseAbs();
    out.grad_embeddings_bound.row(entry.right) += d_bound * embeddings.row(entry.left).cwiseAbs();
  }
}

}  // namespace

LossAndGradient mean_cross_entropy_backward(const RealRows& embeddings,
                                            const std::vector<LogitRow>& rows,
                                            const LossSettings& settings, bool apply_mask) {
  INFONCE_ASSERT(!rows.empty());
  LossAndGradient out;
  out.grad_embeddings = RealRows::Zero(embeddings.rows(), embeddings.cols());
  out.grad_embeddings_bound = out.grad_embeddings;
  const Real weight = 1 / static_cast<Real>(rows.size());  // the mean over rows
  Scratch scratch;
  for (const LogitRow& row : rows) {
    add_row(embeddings, row, settings, apply_mask, weight, scratch, out);
  }
  return out;
}

}  // namespace infonce::oracle
