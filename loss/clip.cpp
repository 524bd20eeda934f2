#include "loss/clip.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>

#include "base/assert.hpp"
#include "base/error.hpp"
#include "loss/encoder.hpp"
#include "loss/ordered_dot.hpp"

namespace infonce::loss {

namespace {

std::string number(double value) {
  std::ostringstream out;
  out.precision(17);
  out << value;
  return out.str();
}

std::string shape(Eigen::Index rows, Eigen::Index cols) {
  return std::to_string(rows) + " x " + std::to_string(cols);
}

template <class Scalar>
void check_rows(const ClipRows<Scalar>& rows, const ClipLogitParameters& parameters) {
  const Eigen::Index queries = rows.image_queries.rows();
  const Eigen::Index docs = rows.image_docs.rows();
  const Eigen::Index dim = rows.image_queries.cols();
  if (queries == 0) throw InputError("the CLIP loss needs at least one pair (the batch has none)");
  if (rows.text_queries.rows() != queries || rows.text_queries.cols() != dim) {
    throw InputError("CLIP text queries are " +
                     shape(rows.text_queries.rows(), rows.text_queries.cols()) +
                     ", the image queries " + shape(queries, dim));
  }
  if (rows.text_docs.rows() != docs || rows.image_docs.cols() != dim ||
      rows.text_docs.cols() != dim) {
    throw InputError("CLIP documents are " + shape(docs, rows.image_docs.cols()) + " (image) and " +
                     shape(rows.text_docs.rows(), rows.text_docs.cols()) +
                     " (text), the queries have " + std::to_string(dim) + " columns");
  }
  if (rows.target_offset < 0 || rows.target_offset + queries > docs) {
    throw InputError("CLIP targets " + std::to_string(rows.target_offset) + ".." +
                     std::to_string(rows.target_offset + queries - 1) + " are outside the " +
                     std::to_string(docs) + " documents");
  }
  if (!std::isfinite(parameters.log_scale)) {
    throw InputError("logit_scale (log) = " + number(parameters.log_scale) + " must be finite");
  }
  if (parameters.bias && !std::isfinite(*parameters.bias)) {
    throw InputError("logit_bias = " + number(*parameters.bias) + " must be finite");
  }
  if (!rows.image_queries.allFinite() || !rows.text_queries.allFinite() ||
      !rows.image_docs.allFinite() || !rows.text_docs.allFinite()) {
    throw InputError("CLIP embeddings must be finite");
  }
}

// One direction of the symmetric loss: queries Q against documents D.
template <class Scalar>
struct Direction {
  Matrix<Scalar> similarity;   // Q D^T (before the scale and the bias)
  Matrix<Scalar> grad_logits;  // dL/dz for this direction, already / (2 n)
  Scalar loss = 0;             // this direction's mean cross-entropy / 2
};

template <class Scalar>
Direction<Scalar> one_direction(const Matrix<Scalar>& queries, const Matrix<Scalar>& docs,
                                Eigen::Index target_offset, Scalar scale, Scalar bias) {
  Direction<Scalar> out;
  out.similarity.resize(queries.rows(), docs.rows());
  ordered_products<Scalar>(out.similarity, queries, docs);
  out.grad_logits.resize(queries.rows(), docs.rows());
  const auto n = static_cast<Scalar>(queries.rows());
  for (Eigen::Index i = 0; i < queries.rows(); ++i) {
    // Row i: logits z = scale * s + bias, cross-entropy with target offset + i,
    // through the max-shifted log-sum-exp.
    Scalar largest = -INFINITY;
    for (Eigen::Index j = 0; j < docs.rows(); ++j)
      largest = std::max(largest, scale * out.similarity(i, j) + bias);
    if (!std::isfinite(largest)) throw InputError("CLIP logits overflow: scale * similarity");
    Scalar sum = 0;
    for (Eigen::Index j = 0; j < docs.rows(); ++j) {
      const Scalar e = std::exp(scale * out.similarity(i, j) + bias - largest);
      out.grad_logits(i, j) = e;
      sum += e;
    }
    const Eigen::Index target = target_offset + i;
    const Scalar target_logit = scale * out.similarity(i, target) + bias;
    out.loss += (std::log(sum) + largest - target_logit) / (Scalar(2) * n);
    // d CE / dz = softmax - onehot; the loss is the mean over n rows, halved.
    out.grad_logits.row(i) /= sum;
    out.grad_logits(i, target) -= Scalar(1);
    out.grad_logits.row(i) /= Scalar(2) * n;
  }
  return out;
}

// dL/dQ = scale * G D, dL/dD = scale * G^T Q, summed in index order.
template <class Scalar>
Matrix<Scalar> left_product(const Matrix<Scalar>& grad, const Matrix<Scalar>& right, Scalar scale) {
  Matrix<Scalar> out = Matrix<Scalar>::Zero(grad.rows(), right.cols());
  for (Eigen::Index i = 0; i < grad.rows(); ++i) {
    for (Eigen::Index j = 0; j < grad.cols(); ++j) out.row(i) += grad(i, j) * right.row(j);
  }
  return scale * out;
}

template <class Scalar>
Matrix<Scalar> transposed_product(const Matrix<Scalar>& grad, const Matrix<Scalar>& left,
                                  Scalar scale) {
  Matrix<Scalar> out = Matrix<Scalar>::Zero(grad.cols(), left.cols());
  for (Eigen::Index i = 0; i < grad.rows(); ++i) {
    for (Eigen::Index j = 0; j < grad.cols(); ++j) out.row(j) += grad(i, j) * left.row(i);
  }
  return scale * out;
}

template <class Scalar>
void add_direct(const Direction<Scalar>& d, Scalar scale, ClipRowsGradient<Scalar>& out) {
  // z = exp(log_scale) s + b: dz/dlog_scale = scale * s, dz/db = 1.
  for (Eigen::Index i = 0; i < d.grad_logits.rows(); ++i) {
    for (Eigen::Index j = 0; j < d.grad_logits.cols(); ++j) {
      const Scalar term = d.grad_logits(i, j) * scale * d.similarity(i, j);
      out.grad_log_scale += term;
      out.grad_log_scale_magnitude += std::fabs(term);
      out.grad_bias += d.grad_logits(i, j);
      out.grad_bias_magnitude += std::fabs(d.grad_logits(i, j));
    }
  }
}

}  // namespace

template <class Scalar>
ClipRowsGradient<Scalar> clip_loss_and_gradient(const ClipRows<Scalar>& rows,
                                                const ClipLogitParameters& parameters) {
  check_rows(rows, parameters);
  const auto scale = static_cast<Scalar>(std::exp(parameters.log_scale));
  if (!std::isfinite(scale)) throw InputError("logit_scale = exp(log) overflows");
  const auto bias = static_cast<Scalar>(parameters.bias.value_or(0.0));
  const Direction<Scalar> i2t =
      one_direction(rows.image_queries, rows.text_docs, rows.target_offset, scale, bias);
  const Direction<Scalar> t2i =
      one_direction(rows.text_queries, rows.image_docs, rows.target_offset, scale, bias);

  ClipRowsGradient<Scalar> out;
  out.loss = i2t.loss + t2i.loss;
  out.grad_image_queries = left_product(i2t.grad_logits, rows.text_docs, scale);
  out.grad_text_docs = transposed_product(i2t.grad_logits, rows.image_queries, scale);
  out.grad_text_queries = left_product(t2i.grad_logits, rows.image_docs, scale);
  out.grad_image_docs = transposed_product(t2i.grad_logits, rows.text_queries, scale);
  add_direct(i2t, scale, out);
  add_direct(t2i, scale, out);
  if (!parameters.bias) {
    out.grad_bias = 0;
    out.grad_bias_magnitude = 0;
  }
  return out;
}

template <class Scalar>
ClipEmbeddingGradient<Scalar> clip_global_loss_and_gradient(const Matrix<Scalar>& image,
                                                            const Matrix<Scalar>& text,
                                                            const ClipLogitParameters& parameters) {
  const ClipRowsGradient<Scalar> rows =
      clip_loss_and_gradient<Scalar>({image, text, image, text, 0}, parameters);
  ClipEmbeddingGradient<Scalar> out;
  out.loss = rows.loss;
  out.grad_image = rows.grad_image_queries + rows.grad_image_docs;
  out.grad_text = rows.grad_text_queries + rows.grad_text_docs;
  out.grad_log_scale = rows.grad_log_scale;
  out.grad_bias = rows.grad_bias;
  out.grad_log_scale_magnitude = rows.grad_log_scale_magnitude;
  out.grad_bias_magnitude = rows.grad_bias_magnitude;
  return out;
}

template <class Scalar>
ClipFullBatchResult<Scalar> clip_full_batch(const ClipTowers& towers,
                                            const Matrix<double>& image_features,
                                            const Matrix<double>& text_features,
                                            const ClipLogitParameters& parameters) {
  if (image_features.rows() != text_features.rows()) {
    throw InputError("CLIP pairs: " + std::to_string(image_features.rows()) + " image rows but " +
                     std::to_string(text_features.rows()) + " text rows");
  }
  if (towers.image_weight.rows() != towers.text_weight.rows()) {
    throw InputError("CLIP towers embed into " + std::to_string(towers.image_weight.rows()) +
                     " (image) and " + std::to_string(towers.text_weight.rows()) +
                     " (text) dimensions");
  }
  return tower_pair_full_batch<Scalar>(
      towers, image_features, text_features,
      [&parameters](const Matrix<Scalar>& image, const Matrix<Scalar>& text) {
        return clip_global_loss_and_gradient(image, text, parameters);
      });
}

#define INFONCE_INSTANTIATE(Scalar)                                                              \
  template ClipRowsGradient<Scalar> clip_loss_and_gradient(const ClipRows<Scalar>&,              \
                                                           const ClipLogitParameters&);          \
  template ClipEmbeddingGradient<Scalar> clip_global_loss_and_gradient(                          \
      const Matrix<Scalar>&, const Matrix<Scalar>&, const ClipLogitParameters&);                 \
  template ClipFullBatchResult<Scalar> clip_full_batch(const ClipTowers&, const Matrix<double>&, \
                                                       const Matrix<double>&,                    \
                                                       const ClipLogitParameters&);

INFONCE_INSTANTIATE(float)
INFONCE_INSTANTIATE(double)
INFONCE_INSTANTIATE(long double)

#undef INFONCE_INSTANTIATE

}  // namespace infonce::loss
