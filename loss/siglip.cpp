#include "loss/siglip.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "base/error.hpp"
#include "loss/encoder.hpp"
#include "loss/ordered_dot.hpp"

namespace infonce::loss {
namespace {

std::string shape(Eigen::Index rows, Eigen::Index cols) {
  return std::to_string(rows) + " x " + std::to_string(cols);
}

template <class Scalar>
void check_rows(const SigLipRows<Scalar>& rows, const SigLipLogitParameters& parameters) {
  const Eigen::Index images = rows.images.rows();
  if (images == 0) throw InputError("the SigLIP loss needs at least one pair (the batch has none)");
  if (rows.texts.cols() != rows.images.cols()) {
    throw InputError("SigLIP texts are " + shape(rows.texts.rows(), rows.texts.cols()) +
                     ", the images " + shape(images, rows.images.cols()));
  }
  if (rows.positive_offset < 0 || rows.positive_offset + images > rows.texts.rows()) {
    throw InputError("SigLIP pairs " + std::to_string(rows.positive_offset) + ".." +
                     std::to_string(rows.positive_offset + images - 1) + " are outside the " +
                     std::to_string(rows.texts.rows()) + " texts");
  }
  if (!std::isfinite(parameters.log_scale) || !std::isfinite(parameters.bias)) {
    throw InputError("SigLIP log_scale and bias must be finite");
  }
  if (!rows.images.allFinite() || !rows.texts.allFinite()) {
    throw InputError("SigLIP embeddings must be finite");
  }
}

// softplus(x) = log(1 + exp(x)) without overflow.
template <class Scalar>
Scalar softplus(Scalar x) {
  return std::max(x, Scalar(0)) + std::log1p(std::exp(-std::fabs(x)));
}

// sigmoid(x) without overflow.
template <class Scalar>
Scalar sigmoid(Scalar x) {
  if (x >= 0) return Scalar(1) / (Scalar(1) + std::exp(-x));
  const Scalar e = std::exp(x);
  return e / (Scalar(1) + e);
}

}  // namespace

template <class Scalar>
SigLipRowsGradient<Scalar> siglip_loss_and_gradient(const SigLipRows<Scalar>& rows,
                                                    const SigLipLogitParameters& parameters) {
  check_rows(rows, parameters);
  const auto scale = static_cast<Scalar>(std::exp(parameters.log_scale));
  if (!std::isfinite(scale)) throw InputError("SigLIP scale = exp(log_scale) overflows");
  const auto bias = static_cast<Scalar>(parameters.bias);
  const Eigen::Index n = rows.images.rows();
  const Eigen::Index m = rows.texts.rows();
  Matrix<Scalar> similarity(n, m);
  ordered_products<Scalar>(similarity, rows.images, rows.texts);

  SigLipRowsGradient<Scalar> out;
  // dL/dz_ij: the term is softplus(-y z) / n, its derivative -y sigmoid(-y z) / n.
  Matrix<Scalar> grad_logits(n, m);
  for (Eigen::Index i = 0; i < n; ++i) {
    for (Eigen::Index j = 0; j < m; ++j) {
      const Scalar label = j == rows.positive_offset + i ? Scalar(1) : Scalar(-1);
      const Scalar logit = scale * similarity(i, j) + bias;
      if (!std::isfinite(logit)) throw InputError("SigLIP logits overflow: scale * similarity");
      out.loss += softplus(-label * logit);
      grad_logits(i, j) = -label * sigmoid(-label * logit) / static_cast<Scalar>(n);
      const Scalar log_scale_term = grad_logits(i, j) * scale * similarity(i, j);
      out.grad_log_scale += log_scale_term;
      out.grad_log_scale_magnitude += std::fabs(log_scale_term);
      out.grad_bias += grad_logits(i, j);
      out.grad_bias_magnitude += std::fabs(grad_logits(i, j));
    }
  }
  out.loss /= static_cast<Scalar>(n);
  // dL/da_i = scale sum_j g_ij b_j, dL/db_j = scale sum_i g_ij a_i, in index order.
  out.grad_images = Matrix<Scalar>::Zero(n, rows.images.cols());
  out.grad_texts = Matrix<Scalar>::Zero(m, rows.texts.cols());
  for (Eigen::Index i = 0; i < n; ++i) {
    for (Eigen::Index j = 0; j < m; ++j) {
      out.grad_images.row(i) += grad_logits(i, j) * rows.texts.row(j);
      out.grad_texts.row(j) += grad_logits(i, j) * rows.images.row(i);
    }
  }
  out.grad_images *= scale;
  out.grad_texts *= scale;
  return out;
}

template <class Scalar>
SigLipFullBatchResult<Scalar> siglip_full_batch(const ClipTowers& towers,
                                                const Matrix<double>& image_features,
                                                const Matrix<double>& text_features,
                                                const SigLipLogitParameters& parameters) {
  if (image_features.rows() != text_features.rows()) {
    throw InputError("SigLIP pairs: " + std::to_string(image_features.rows()) + " image rows but " +
                     std::to_string(text_features.rows()) + " text rows");
  }
  return tower_pair_full_batch<Scalar>(
      towers, image_features, text_features,
      [&parameters](const Matrix<Scalar>& image, const Matrix<Scalar>& text) {
        SigLipRowsGradient<Scalar> g =
            siglip_loss_and_gradient<Scalar>({image, text, 0}, parameters);
        return TowerPairEmbeddingGradient<Scalar>{
            g.loss,      std::move(g.grad_images),   std::move(g.grad_texts), g.grad_log_scale,
            g.grad_bias, g.grad_log_scale_magnitude, g.grad_bias_magnitude};
      });
}

#define INFONCE_INSTANTIATE(Scalar)                                                           \
  template SigLipRowsGradient<Scalar> siglip_loss_and_gradient(const SigLipRows<Scalar>&,     \
                                                               const SigLipLogitParameters&); \
  template SigLipFullBatchResult<Scalar> siglip_full_batch(                                   \
      const ClipTowers&, const Matrix<double>&, const Matrix<double>&,                        \
      const SigLipLogitParameters&);

INFONCE_INSTANTIATE(float)
INFONCE_INSTANTIATE(double)
INFONCE_INSTANTIATE(long double)

#undef INFONCE_INSTANTIATE

}  // namespace infonce::loss
