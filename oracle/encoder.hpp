// SPEC section 1: the encoder e = W x, optionally followed by L2
// normalisation e / max(||e||, eps) (torch's F.normalize, eps 1e-12).
#pragma once

#include <cmath>

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

}  // namespace infonce::oracle
