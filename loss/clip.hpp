// The CLIP loss family: the symmetric cross-entropy over image-to-text and
// text-to-image logits, with two encoders (an image tower and a text tower,
// each e = W x with optional L2 normalisation, loss/encoder.hpp) and the
// parameters that enter the loss directly: CLIP's logit scale, stored as its
// log as CLIP stores it, and an optional logit bias.
//
//   z_i2t = exp(log_scale) * Iq Td^T + bias,  z_t2i = exp(log_scale) * Tq Id^T + bias
//   L = ( mean_i CE(z_i2t row i, offset + i) + mean_i CE(z_t2i row i, offset + i) ) / 2
//
// Global loss: queries = documents = the whole batch, offset 0. Local loss
// (open_clip's local_loss): queries are one rank's rows, documents every
// gathered row, and the targets are offset by the rank's row prefix.
//
// The bias adds one constant to every logit of a row, and a softmax
// cross-entropy is invariant to that: L does not depend on the bias and
// dL/dbias is exactly 0 (it is computed, not assumed, so a wrong program that
// makes it nonzero is visible). Pure math, no ranks.
#pragma once

#include <optional>

#include "loss/matrix.hpp"
#include "loss/tower_pair_full_batch.hpp"

namespace infonce::loss {

// CLIP's initial temperature 0.07: log_scale = log(1 / 0.07).
inline constexpr double kClipInitialLogScale = 2.6592600369327779;

struct ClipLogitParameters {
  double log_scale = kClipInitialLogScale;
  std::optional<double> bias;  // unset: no bias term (its gradient is reported as 0)
};

// Which embedding rows play queries and which documents. Every matrix has
// one row per example and D columns; the queries are rows
// [target_offset, target_offset + queries) of the documents' batch.
template <class Scalar>
struct ClipRows {
  const Matrix<Scalar>& image_queries;  // n x D
  const Matrix<Scalar>& text_queries;   // n x D
  const Matrix<Scalar>& image_docs;     // M x D
  const Matrix<Scalar>& text_docs;      // M x D
  Eigen::Index target_offset = 0;
};

template <class Scalar>
struct ClipRowsGradient {
  Scalar loss = 0;
  Matrix<Scalar> grad_image_queries, grad_text_queries;  // n x D
  Matrix<Scalar> grad_image_docs, grad_text_docs;        // M x D
  Scalar grad_log_scale = 0;
  Scalar grad_bias = 0;
  // Sums of the absolute values of the terms each direct gradient adds up:
  // the scale of its rounding error (grad_bias sums terms that cancel to 0).
  Scalar grad_log_scale_magnitude = 0;
  Scalar grad_bias_magnitude = 0;
};

// Loss and exact gradient with respect to every row and both direct
// parameters. Throws InputError on mismatched shapes, an empty query set,
// targets outside the documents, non-finite inputs or overflowing logits.
template <class Scalar>
ClipRowsGradient<Scalar> clip_loss_and_gradient(const ClipRows<Scalar>& rows,
                                                const ClipLogitParameters& parameters);

// The global loss over embeddings I, T (N x D each): queries = documents,
// each row's gradient the query and document roles summed.
template <class Scalar>
using ClipEmbeddingGradient = TowerPairEmbeddingGradient<Scalar>;

template <class Scalar>
ClipEmbeddingGradient<Scalar> clip_global_loss_and_gradient(const Matrix<Scalar>& image,
                                                            const Matrix<Scalar>& text,
                                                            const ClipLogitParameters& parameters);

// The full-batch CLIP objective over paired features (row i of each is one
// pair), gradient with respect to both towers and the direct parameters.
template <class Scalar>
using ClipFullBatchResult = TowerPairFullBatchResult<Scalar>;

template <class Scalar>
ClipFullBatchResult<Scalar> clip_full_batch(const ClipTowers& towers,
                                            const Matrix<double>& image_features,
                                            const Matrix<double>& text_features,
                                            const ClipLogitParameters& parameters);

}  // namespace infonce::loss
