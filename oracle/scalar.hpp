// The oracle's forward runs on long double and, in the tests, on Eigen's
// forward-mode AutoDiffScalar. Comparisons (masking, the normalisation's eps
// branch) read the plain value: no gradient flows through a comparison.
#pragma once

#include <type_traits>

#include "oracle/real.hpp"

namespace infonce::oracle {

template <class S>
Real value_of(const S& x) {
  if constexpr (std::is_same_v<S, Real>) {
    return x;
  } else {
    return x.value();
  }
}

// Row a of A dotted with row b of B, summed in index order.
template <class S>
S dot_rows(const Rows<S>& a_rows, Eigen::Index a, const Rows<S>& b_rows, Eigen::Index b) {
  S sum(0);
  for (Eigen::Index k = 0; k < a_rows.cols(); ++k) sum += a_rows(a, k) * b_rows(b, k);
  return sum;
}

}  // namespace infonce::oracle
