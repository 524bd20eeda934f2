// SPEC section 1: the encoder e = W x, optionally followed by L2
// normalisation e / max(||e||, eps) (torch's F.normalize, eps 1e-12).
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>

#include "oracle/real.hpp"
#include "oracle/scalar.hpp"

namespace infonce::oracle {

inline constexpr Real kNormalizeEps = 1e-12L;

// One embedding per row of `sentences` (F features): rows x D.
template <class S>
Rows<S> encode(const Rows<S>& weight, const RealRows& sentences, bool normalize) {
  using std::sqrt;
  Rows<S> embeddings(sentences.rows(), weight.rows());
  for (Eigen::Index r = 0; r < sentences.rows(); ++r) {
    for (Eigen::Index i = 0; i < weight.rows(); ++i) {
      S sum(0);
      for (Eigen::Index j = 0; j < weight.cols(); ++j) sum += weight(i, j) * S(sentences(r, j));
      embeddings(r, i) = sum;
    }
    if (!normalize) continue;
    const S norm = sqrt(dot_rows(embeddings, r, embeddings, r));
    const S divisor = value_of(norm) > kNormalizeEps ? norm : S(kNormalizeEps);
    for (Eigen::Index i = 0; i < weight.rows(); ++i) embeddings(r, i) /= divisor;
  }
  return embeddings;
}

// How far the rounding of W x can turn an embedding's direction: the largest
// || |W| |x| || / || W x || over the rows (>= 1). In a precision of unit
// roundoff u, W x is off by at most F u |W| |x| (F features), so a row whose
// features nearly cancel has its direction off by up to F u times this (seed
// 2027 case 413945: 1297, a float32 gradient off by 3.5 times rtol). A row
// that encodes to exactly zero from nonzero terms is infinitely conditioned;
// an all-zero row has nothing to round (1).
inline Real encoding_condition(const RealRows& weight, const RealRows& sentences) {
  Real worst = 1;
  for (Eigen::Index r = 0; r < sentences.rows(); ++r) {
    Real magnitude_squared = 0, value_squared = 0;  // of |W| |x| and of W x
    for (Eigen::Index i = 0; i < weight.rows(); ++i) {
      const Real magnitude = weight.row(i).cwiseAbs().dot(sentences.row(r).cwiseAbs());
      const Real value = weight.row(i).dot(sentences.row(r));
      magnitude_squared += magnitude * magnitude;
      value_squared += value * value;
    }
    if (magnitude_squared == 0) continue;
    worst = std::max(worst, value_squared == 0 ? std::numeric_limits<Real>::infinity()
                                               : std::sqrt(magnitude_squared / value_squared));
  }
  return worst;
}

}  // namespace infonce::oracle
