// What CLIP's and SigLIP's full-batch objectives share (loss/clip.hpp,
// loss/siglip.hpp): both towers encode their pairs' features in Scalar, the
// family's loss gives the gradient with respect to the embeddings and its
// direct parameters, and that gradient goes back through the towers. The
// family supplies only the loss of the embeddings.
#pragma once

#include "loss/encoder.hpp"
#include "loss/matrix.hpp"

namespace infonce::loss {

// The two towers.
struct ClipTowers {
  Matrix<double> image_weight;  // D x F_image
  bool image_normalize = true;
  Matrix<double> text_weight;  // D x F_text
  bool text_normalize = true;
};

// A family's loss over embeddings I, T (N x D each), what the towers'
// backward takes.
template <class Scalar>
struct TowerPairEmbeddingGradient {
  Scalar loss = 0;
  Matrix<Scalar> grad_image, grad_text;  // N x D
  Scalar grad_log_scale = 0;
  Scalar grad_bias = 0;
  Scalar grad_log_scale_magnitude = 0;
  Scalar grad_bias_magnitude = 0;
};

// The full-batch objective over paired features (row i of each is one pair),
// gradient with respect to both towers and the direct parameters.
template <class Scalar>
struct TowerPairFullBatchResult {
  Scalar loss = 0;
  Matrix<Scalar> grad_image_weight;  // D x F_image
  Matrix<Scalar> grad_text_weight;   // D x F_text
  Scalar grad_log_scale = 0;
  Scalar grad_bias = 0;
  // encode_backward_magnitude of each tower, and the direct magnitudes.
  Matrix<Scalar> grad_image_weight_magnitude;
  Matrix<Scalar> grad_text_weight_magnitude;
  Scalar grad_log_scale_magnitude = 0;
  Scalar grad_bias_magnitude = 0;
};

// `embedding_loss(image, text)`: the family's TowerPairEmbeddingGradient of
// the encoded rows. The caller has checked the pairs' shapes.
template <class Scalar, class EmbeddingLoss>
TowerPairFullBatchResult<Scalar> tower_pair_full_batch(const ClipTowers& towers,
                                                       const Matrix<double>& image_features,
                                                       const Matrix<double>& text_features,
                                                       const EmbeddingLoss& embedding_loss) {
  const Matrix<Scalar> image_weight = towers.image_weight.cast<Scalar>();
  const Matrix<Scalar> text_weight = towers.text_weight.cast<Scalar>();
  const Matrix<Scalar> image_x = image_features.cast<Scalar>();
  const Matrix<Scalar> text_x = text_features.cast<Scalar>();
  const Matrix<Scalar> image = encode(image_weight, image_x, towers.image_normalize);
  const Matrix<Scalar> text = encode(text_weight, text_x, towers.text_normalize);
  const TowerPairEmbeddingGradient<Scalar> g = embedding_loss(image, text);

  TowerPairFullBatchResult<Scalar> out;
  out.loss = g.loss;
  out.grad_image_weight =
      encode_backward(image_weight, image_x, towers.image_normalize, g.grad_image);
  out.grad_text_weight = encode_backward(text_weight, text_x, towers.text_normalize, g.grad_text);
  out.grad_image_weight_magnitude =
      encode_backward_magnitude(image_weight, image_x, towers.image_normalize, g.grad_image);
  out.grad_text_weight_magnitude =
      encode_backward_magnitude(text_weight, text_x, towers.text_normalize, g.grad_text);
  out.grad_log_scale = g.grad_log_scale;
  out.grad_bias = g.grad_bias;
  out.grad_log_scale_magnitude = g.grad_log_scale_magnitude;
  out.grad_bias_magnitude = g.grad_bias_magnitude;
  return out;
}

}  // namespace infonce::loss
