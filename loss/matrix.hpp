// Dense row-major matrices: one embedding (or feature vector) per row.
#pragma once

#include <Eigen/Core>

namespace infonce {

template <class Scalar>
using Matrix = Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

template <class Scalar>
using Vector = Eigen::Matrix<Scalar, Eigen::Dynamic, 1>;

}  // namespace infonce
