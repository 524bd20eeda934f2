#include "oracle/encoder_backward.hpp"

#include <cmath>

#include "base/assert.hpp"
#include "oracle/encoder.hpp"

namespace infonce::oracle {

void add_encoder_backward(const RealRows& weight, const RealRows& sentences, bool normalize,
                          const RealRows& grad_embeddings, Real factor, RealRows& grad,
                          RealRows& magnitude) {
  INFONCE_ASSERT(grad_embeddings.rows() == sentences.rows());
  INFONCE_ASSERT(grad_embeddings.cols() == weight.rows());
  Eigen::Matrix<Real, Eigen::Dynamic, 1> linear(weight.rows());  // e = W x
  Eigen::Matrix<Real, Eigen::Dynamic, 1> grad_linear(weight.rows());
  Eigen::Matrix<Real, Eigen::Dynamic, 1> unit(weight.rows());
  for (Eigen::Index r = 0; r < sentences.rows(); ++r) {
    linear.noalias() = weight * sentences.row(r).transpose();
    grad_linear = grad_embeddings.row(r).transpose();
    if (normalize) {
      const Real norm = std::sqrt(linear.squaredNorm());
      if (norm > kNormalizeEps) {
        unit = linear / norm;
        grad_linear = (grad_linear - unit * unit.dot(grad_linear)) / norm;
      } else {
        grad_linear /= kNormalizeEps;
      }
    }
    for (Eigen::Index i = 0; i < weight.rows(); ++i) {
      for (Eigen::Index j = 0; j < weight.cols(); ++j) {
        const Real term = factor * grad_linear(i) * sentences(r, j);
        grad(i, j) += term;
        magnitude(i, j) += std::abs(term);
      }
    }
  }
}

void add_encoder_backward_bound(const RealRows& weight, const RealRows& sentences, bool normalize,
                                const RealRows& grad_embeddings_bound, Real factor,
                                RealRows& bound) {
  Eigen::Matrix<Real, Eigen::Dynamic, 1> linear(weight.rows());
  Eigen::Matrix<Real, Eigen::Dynamic, 1> g(weight.rows());
  Eigen::Matrix<Real, Eigen::Dynamic, 1> unit(weight.rows());
  for (Eigen::Index r = 0; r < sentences.rows(); ++r) {
    linear.noalias() = weight * sentences.row(r).transpose();
    g = grad_embeddings_bound.row(r).transpose();
    if (normalize) {
      const Real norm = std::sqrt(linear.squaredNorm());
      if (norm > kNormalizeEps) {
        unit = (linear / norm).cwiseAbs();
        g = (g + unit * unit.dot(g)) / norm;
      } else {
        g /= kNormalizeEps;
      }
    }
    for (Eigen::Index i = 0; i < weight.rows(); ++i) {
      for (Eigen::Index j = 0; j < weight.cols(); ++j) {
        bound(i, j) += std::abs(factor * g(i) * sentences(r, j));
      }
    }
  }
}

}  // namespace infonce::oracle
