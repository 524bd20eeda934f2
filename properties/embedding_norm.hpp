// The norm of an embedding row y = W x as the loss sees it, for the
// rounding allowances of the parameters that multiply embeddings' dot
// products (a temperature, a logit scale). Normalised, the row is
// y / max(|y|, eps): norm 1 for any |y| >= eps, however small |y| is (a
// bound of min(|y|, 1) let a tiny feature vector shrink the allowance of a
// log scale's gradient to nothing; the 1,000,000-case grid found it).
#pragma once

#include <algorithm>

#include "loss/encoder.hpp"

namespace infonce::properties {

inline double embedding_norm(double raw_norm, bool normalize) {
  return normalize ? std::min(raw_norm / loss::kNormalizeEps, 1.0) : raw_norm;
}

// How much an embedding row's gradient grows on its way back to W, per unit
// of the logits' scale, for the encoders' rounding allowances. Plain:
// dL/dy reaches the other rows' norm, |y| at most. Normalised: the
// normalisation's Jacobian multiplies by 1 / |y|, so a row of norm below 1
// amplifies (min(|y|, 1) shrank the allowance to nothing for tiny features;
// the 1,000,000-case grid found it); at or above 1, the factor 1 of before.
inline double encoder_row_factor(double raw_norm, bool normalize) {
  if (!normalize) return raw_norm;
  return std::max(1.0, 1.0 / std::max(raw_norm, loss::kNormalizeEps));
}

}  // namespace infonce::properties
