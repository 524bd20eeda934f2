// The oracle's number type. Everything the oracle computes is in long double,
// so its own rounding error is about 2^-64 relative: far below the campaign's
// float64 tolerance, which it judges.
#pragma once

#include <Eigen/Core>

namespace infonce::oracle {

using Real = long double;

// Row-major like the case file: row r is one sentence (or one row of W).
template <class S>
using Rows = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using RealRows = Rows<Real>;

}  // namespace infonce::oracle
