// The SigLIP loss family (SPEC section 15): every image scored against every
// text by a sigmoid, two towers as CLIP's (ClipTowers,
// loss/tower_pair_full_batch.hpp), and two direct parameters, the scale
// (stored as its log) and the bias:
//
//   z_ij = exp(log_scale) * a_i . b_j + bias,  y_ij = +1 for a pair, else -1
//   L = -(1 / n) sum_i sum_j log sigmoid(y_ij z_ij)
//
// over the n scored images i and every text j. Full batch: n = N, all pairs.
// A rank of open_clip's SigLipLoss scores its own n images against every
// rank's texts and divides by its own n: the same function with the images
// the own rows and the pairs' texts at the own slot's offset. Pure math, no
// ranks.
#pragma once

#include "loss/clip.hpp"
#include "loss/matrix.hpp"
#include "loss/tower_pair_full_batch.hpp"

namespace infonce::loss {

struct SigLipLogitParameters {
  double log_scale = 0;
  double bias = 0;
};

// Image i's pair is text row positive_offset + i; every other text is a
// negative of image i. The loss is divided by images.rows().
template <class Scalar>
struct SigLipRows {
  const Matrix<Scalar>& images;  // n x D
  const Matrix<Scalar>& texts;   // M x D
  Eigen::Index positive_offset = 0;
};

template <class Scalar>
struct SigLipRowsGradient {
  Scalar loss = 0;
  Matrix<Scalar> grad_images;  // n x D
  Matrix<Scalar> grad_texts;   // M x D
  Scalar grad_log_scale = 0;
  Scalar grad_bias = 0;
  // Sums of the absolute values of the terms each direct gradient adds up.
  Scalar grad_log_scale_magnitude = 0;
  Scalar grad_bias_magnitude = 0;
};

// Loss and exact gradient with respect to every row and both direct
// parameters. Throws InputError on mismatched shapes, no images, pairs
// outside the texts, non-finite inputs or an overflowing scale.
template <class Scalar>
SigLipRowsGradient<Scalar> siglip_loss_and_gradient(const SigLipRows<Scalar>& rows,
                                                    const SigLipLogitParameters& parameters);

// The full-batch SigLIP objective over paired features (row i of each is one
// pair), gradient with respect to both towers and the direct parameters.
template <class Scalar>
using SigLipFullBatchResult = TowerPairFullBatchResult<Scalar>;

template <class Scalar>
SigLipFullBatchResult<Scalar> siglip_full_batch(const ClipTowers& towers,
                                                const Matrix<double>& image_features,
                                                const Matrix<double>& text_features,
                                                const SigLipLogitParameters& parameters);

}  // namespace infonce::loss
