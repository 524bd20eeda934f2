#include "loss/encoder.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "base/error.hpp"
#include "loss/ordered_dot.hpp"

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
  // Row by row in one summation order: a sentence's embedding is the same
  // bits whichever batch it is encoded in (see ordered_dot.hpp).
  Matrix<Scalar> embeddings(features.rows(), weight.rows());
  ordered_products<Scalar>(embeddings, features, weight);
  if (!normalize) return embeddings;
  const Scalar eps = static_cast<Scalar>(kNormalizeEps);
  for (Eigen::Index i = 0; i < embeddings.rows(); ++i) {
    const Scalar norm = std::sqrt(ordered_dot<Scalar>(embeddings.row(i), embeddings.row(i)));
    embeddings.row(i) /= std::max(norm, eps);  // torch: x / norm(x).clamp_min(eps)
  }
  return embeddings;
}

namespace {

// dL/dY for Y = X W^T, through the optional normalisation e = y / max(|y|, eps).
template <class Scalar>
Matrix<Scalar> linear_gradient(const Matrix<Scalar>& weight, const Matrix<Scalar>& features,
                               bool normalize, const Matrix<Scalar>& grad_embeddings) {
  check_encoder_input(weight, features);
  if (grad_embeddings.rows() != features.rows() || grad_embeddings.cols() != weight.rows()) {
    throw InputError("encode_backward: gradient shape does not match the embeddings");
  }
  if (!normalize) return grad_embeddings;
  const Scalar eps = static_cast<Scalar>(kNormalizeEps);
  Matrix<Scalar> linear(features.rows(), weight.rows());
  ordered_products<Scalar>(linear, features, weight);
  Matrix<Scalar> grad_linear(linear.rows(), linear.cols());
  for (Eigen::Index i = 0; i < linear.rows(); ++i) {
    const auto y = linear.row(i);
    const auto g = grad_embeddings.row(i);
    const Scalar norm = std::sqrt(ordered_dot<Scalar>(y, y));
    if (norm >= eps) {
      // e = y / n: dy = (g - e (e . g)) / n. (torch's clamp_min passes the
      // gradient when n >= eps.)
      grad_linear.row(i) = (g - y * (ordered_dot<Scalar>(g, y) / (norm * norm))) / norm;
    } else {
      // e = y / eps, a linear map of y.
      grad_linear.row(i) = g / eps;
    }
  }
  return grad_linear;
}

}  // namespace

template <class Scalar>
Matrix<Scalar> encode_backward(const Matrix<Scalar>& weight, const Matrix<Scalar>& features,
                               bool normalize, const Matrix<Scalar>& grad_embeddings) {
  return linear_gradient(weight, features, normalize, grad_embeddings).transpose() * features;
}

template <class Scalar>
Matrix<Scalar> encode_backward_magnitude(const Matrix<Scalar>& weight,
                                         const Matrix<Scalar>& features, bool normalize,
                                         const Matrix<Scalar>& grad_embeddings) {
  if (!normalize) {
    return linear_gradient(weight, features, false, grad_embeddings).cwiseAbs().transpose() *
           features.cwiseAbs();
  }
  // Through the normalisation, dy = (g - y (g . y) / n^2) / n cancels (to
  // zero when D = 1): bound its terms, not its result, with
  // (|g| + |y| (|g| . |y|) / n^2) / n.
  check_encoder_input(weight, features);
  const Scalar eps = static_cast<Scalar>(kNormalizeEps);
  Matrix<Scalar> linear(features.rows(), weight.rows());
  ordered_products<Scalar>(linear, features, weight);
  Matrix<Scalar> bound(linear.rows(), linear.cols());
  for (Eigen::Index i = 0; i < linear.rows(); ++i) {
    const auto y = linear.row(i).cwiseAbs();
    const auto g = grad_embeddings.row(i).cwiseAbs();
    const Scalar norm = std::sqrt(ordered_dot<Scalar>(y, y));
    bound.row(i) = norm >= eps ? ((g + y * (ordered_dot<Scalar>(g, y) / (norm * norm))) / norm).eval()
                               : (g / eps).eval();
  }
  return bound.transpose() * features.cwiseAbs();
}

#define INFONCE_INSTANTIATE(Scalar)                                                           \
  template Matrix<Scalar> encode(const Matrix<Scalar>&, const Matrix<Scalar>&, bool);         \
  template Matrix<Scalar> encode_backward(const Matrix<Scalar>&, const Matrix<Scalar>&, bool, \
                                          const Matrix<Scalar>&);                             \
  template Matrix<Scalar> encode_backward_magnitude(const Matrix<Scalar>&, const Matrix<Scalar>&, \
                                                    bool, const Matrix<Scalar>&);

INFONCE_INSTANTIATE(float)
INFONCE_INSTANTIATE(double)
INFONCE_INSTANTIATE(long double)

#undef INFONCE_INSTANTIATE

}  // namespace infonce::loss
