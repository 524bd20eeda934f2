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
    const Eigen::Matrix<Real, Eigen::Dynamic, 1> x = sentences.row(r).transpose();
    const Real magnitude = (weight.cwiseAbs() * x.cwiseAbs()).norm();
    const Real value = (weight * x).norm();
    if (magnitude == 0) continue;
    worst = std::max(worst, value == 0 ? std::numeric_limits<Real>::infinity() : magnitude / value);
  }
  return worst;
}

}  // namespace infonce::oracle
