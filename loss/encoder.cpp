#include "loss/encoder.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "base/error.hpp"

namespace infonce::loss {

namespace {

template <class Scalar>
void check_encoder_input(const Matrix<Scalar>& weight, const Matrix<Scalar>& features) {
  if (features.cols() != weight.cols()) {
    throw InputError("features have " + std::to_string(features.cols()) +
                     " columns but the encoder weight expects " + std::to_string(weight.cols()));
  }
  if (!weight.allFinite()) throw InputError("encoder weight must be finite");
  if (!features.allFinite()) throw InputError("features must be finite");
}

}  // namespace

template <class Scalar>
Matrix<Scalar> encode(const Matrix<Scalar>& weight, const Matrix<Scalar>& features,
                      bool normalize) {
  check_encoder_input(weight, features);
  Matrix<Scalar> embeddings = features * weight.transpose();
  if (!normalize) return embeddings;
  const Scalar eps = static_cast<Scalar>(kNormalizeEps);
  for (Eigen::Index i = 0; i < embeddings.rows(); ++i) {
    const Scalar norm = std::sqrt(embeddings.row(i).squaredNorm());
    embeddings.row(i) /= std::max(norm, eps);  // torch: x / norm(x).clamp_min(eps)
  }
  return embeddings;
}

template <class Scalar>
Matrix<Scalar> encode_backward(const Matrix<Scalar>& weight, const Matrix<Scalar>& features,
                               bool normalize, const Matrix<Scalar>& grad_embeddings) {
  check_encoder_input(weight, features);
  if (grad_embeddings.rows() != features.rows() || grad_embeddings.cols() != weight.rows()) {
    throw InputError("encode_backward: gradient shape does not match the embeddings");
  }
  if (!normalize) return grad_embeddings.transpose() * features;
  const Scalar eps = static_cast<Scalar>(kNormalizeEps);
  const Matrix<Scalar> linear = features * weight.transpose();
  Matrix<Scalar> grad_linear(linear.rows(), linear.cols());
  for (Eigen::Index i = 0; i < linear.rows(); ++i) {
    const auto y = linear.row(i);
    const auto g = grad_embeddings.row(i);
    const Scalar norm = std::sqrt(y.squaredNorm());
    if (norm >= eps) {
      // e = y / n: dy = (g - e (e . g)) / n. (torch's clamp_min passes the
      // gradient when n >= eps.)
      grad_linear.row(i) = (g - y * (g.dot(y) / (norm * norm))) / norm;
    } else {
      // e = y / eps, a linear map of y.
      grad_linear.row(i) = g / eps;
    }
  }
  return grad_linear.transpose() * features;
}

#define INFONCE_INSTANTIATE(Scalar)                                                           \
  template Matrix<Scalar> encode(const Matrix<Scalar>&, const Matrix<Scalar>&, bool);         \
  template Matrix<Scalar> encode_backward(const Matrix<Scalar>&, const Matrix<Scalar>&, bool, \
                                          const Matrix<Scalar>&);

INFONCE_INSTANTIATE(float)
INFONCE_INSTANTIATE(double)
INFONCE_INSTANTIATE(long double)

#undef INFONCE_INSTANTIATE

}  // namespace infonce::loss
