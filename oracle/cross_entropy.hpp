// SPEC section 2: the mean over logit rows of the cross-entropy, with the
// fake-negative mask. The forward alone, for any scalar (long double, or an
// AutoDiff scalar whose derivatives check cross_entropy_backward).
#pragma once

#include <cstddef>
#include <vector>

#include "base/error.hpp"
#include "oracle/description.hpp"
#include "oracle/logit_rows.hpp"
#include "oracle/scalar.hpp"
#include "oracle/softmax_cross_entropy.hpp"

namespace infonce::oracle {

// Masking compares raw similarities (before dividing by T) with the threshold
// h_g = qd[t_g] + margin, a constant; qd and qq entries strictly above it are
// -inf, dd entries never. `similarities[target]` is qd[t_g].
// `kept` is the caller's buffer (reused row after row).
inline void mark_kept_entries(const LogitRow& row, const std::vector<Real>& similarities,
                              const LossSettings& settings, bool apply_mask,
                              std::vector<bool>& kept) {
  kept.assign(row.entries.size(), true);
  if (!apply_mask) return;
  const Real threshold =
      similarities[static_cast<std::size_t>(row.target)] + settings.fake_neg_margin;
  for (std::size_t e = 0; e < row.entries.size(); ++e) {
    if (row.entries[e].block != Block::dd && similarities[e] > threshold) kept[e] = false;
  }
}

// A row with every logit masked has no defined loss (the trainer gives NaN).
inline void require_some_kept(const std::vector<bool>& kept) {
  for (const bool k : kept) {
    if (k) return;
  }
  throw InputError("oracle: every logit of a row is masked");
}

// Cross-entropy of one row at inverse temperature `inverse_temperature`
// (logits tau * s; a parameter of the forward so that AutoDiff can
// differentiate in it). The mask reads the raw similarities, never tau.
template <class S>
S row_cross_entropy(const Rows<S>& embeddings, const LogitRow& row, const LossSettings& settings,
                    bool apply_mask, const S& inverse_temperature) {
  std::vector<S> logits;
  std::vector<Real> similarities;
  for (const Entry& entry : row.entries) {
    const S s = dot_rows(embeddings, entry.left, embeddings, entry.right);
    similarities.push_back(value_of(s));
    logits.push_back(s * inverse_temperature);
  }
  std::vector<bool> kept;
  mark_kept_entries(row, similarities, settings, apply_mask, kept);
  require_some_kept(kept);
  return kept_cross_entropy(logits, kept, static_cast<std::size_t>(row.target));
}

template <class S>
S mean_cross_entropy(const Rows<S>& embeddings, const std::vector<LogitRow>& rows,
                     const LossSettings& settings, bool apply_mask, const S& inverse_temperature) {
  S total(0);
  for (const LogitRow& row : rows) {
    total += row_cross_entropy(embeddings, row, settings, apply_mask, inverse_temperature);
  }
  return total / S(static_cast<Real>(rows.size()));
}

}  // namespace infonce::oracle
