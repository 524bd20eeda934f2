#include "oracle/siglip_loss_backward.hpp"

#include <algorithm>
#include <cmath>

#include "base/assert.hpp"
#include "oracle/scalar.hpp"
#include "oracle/siglip_loss.hpp"

namespace infonce::oracle {
namespace {

void add_term(ScalarGradient& gradient, Real term, Real bound) {
  gradient.value += term;
  gradient.magnitude += std::abs(term);
  gradient.bound += bound;
}

// sigmoid(x) = 1 / (1 + exp(-x)), evaluated where exp cannot overflow.
Real sigmoid(Real x) {
  if (x >= 0) return 1 / (1 + std::exp(-x));
  const Real e = std::exp(x);
  return e / (1 + e);
}

}  // namespace

SigLipLossAndGradient siglip_batch_loss_backward(const RealRows& image, const RealRows& text,
                                                 Real log_scale, Real bias) {
  INFONCE_ASSERT(image.rows() == text.rows() && image.rows() > 0);
  INFONCE_ASSERT(image.cols() == text.cols());
  SigLipLossAndGradient out;
  out.grad_image = RealRows::Zero(image.rows(), image.cols());
  out.grad_text = out.grad_image;
  out.grad_image_bound = out.grad_image;
  out.grad_text_bound = out.grad_image;
  const Real scale = std::exp(log_scale);
  const Real weight = 1 / static_cast<Real>(image.rows());
  for (Eigen::Index i = 0; i < image.rows(); ++i) {
    for (Eigen::Index j = 0; j < text.rows(); ++j) {
      const Real similarity = dot_rows(image, i, text, j);
      const Real logit = scale * similarity + bias;
      out.max_abs_logit = std::max(out.max_abs_logit, std::abs(logit));
      const Real label = i == j ? 1 : -1;
      out.loss += weight * minus_log_sigmoid(label * logit);
      const Real d_logit = -label * weight * sigmoid(-label * logit);
      out.grad_image.row(i) += d_logit * scale * text.row(j);
      out.grad_text.row(j) += d_logit * scale * image.row(i);
      out.grad_image_bound.row(i) += weight * scale * text.row(j).cwiseAbs();
      out.grad_text_bound.row(j) += weight * scale * image.row(i).cwiseAbs();
      add_term(out.log_scale, d_logit * scale * similarity, weight * scale * std::abs(similarity));
      add_term(out.bias, d_logit, weight);
      out.logit_gradient_bound += weight;
    }
  }
  return out;
}

}  // namespace infonce::oracle
