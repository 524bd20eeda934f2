// The cross-entropy of one row of logits against one target, whatever laid
// the row out (InfoNCE's logit rows, CLIP's image and text rows).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "base/assert.hpp"
#include "oracle/real.hpp"
#include "oracle/scalar.hpp"

namespace infonce::oracle {

// The largest kept logit's value: subtracted before exp so that no term
// overflows. A constant, so no derivative flows through the choice.
template <class S>
Real largest_kept(const std::vector<S>& logits, const std::vector<bool>& kept) {
  INFONCE_ASSERT(logits.size() == kept.size());
  Real shift = -std::numeric_limits<Real>::infinity();
  for (std::size_t e = 0; e < logits.size(); ++e) {
    if (kept[e]) shift = std::max(shift, value_of(logits[e]));
  }
  return shift;
}

// logsumexp of the kept logits minus the target's logit; +inf when the target
// itself is not kept (a masked target has no probability). For any scalar:
// the forward AutoDiff differentiates.
template <class S>
S kept_cross_entropy(const std::vector<S>& logits, const std::vector<bool>& kept,
                     std::size_t target) {
  using std::exp;
  using std::log;
  INFONCE_ASSERT(target < logits.size());
  if (!kept[target]) return S(std::numeric_limits<Real>::infinity());
  const Real shift = largest_kept(logits, kept);
  S sum(0);
  for (std::size_t e = 0; e < logits.size(); ++e) {
    if (kept[e]) sum += exp(logits[e] - S(shift));
  }
  return log(sum) + S(shift) - logits[target];
}

// The softmax of the kept logits (0 where not kept) into `probabilities`;
// returns the row's logsumexp. The derived backward's d CE / d z is
// probabilities - onehot(target). The caller makes sure something is kept; a
// NaN logit (from non-finite input) comes out as NaN, not as an abort.
inline Real kept_softmax(const std::vector<Real>& logits, const std::vector<bool>& kept,
                         std::vector<Real>& probabilities) {
  const Real shift = largest_kept(logits, kept);
  probabilities.assign(logits.size(), 0);
  Real sum = 0;
  for (std::size_t e = 0; e < logits.size(); ++e) {
    if (!kept[e]) continue;
    probabilities[e] = std::exp(logits[e] - shift);
    sum += probabilities[e];
  }
  for (Real& p : probabilities) p /= sum;
  return std::log(sum) + shift;
}

}  // namespace infonce::oracle
