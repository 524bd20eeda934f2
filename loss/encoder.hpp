// The encoder: a linear map e = W x, optionally followed by L2 normalisation
// e / max(||e||, eps) with eps = 1e-12, as torch.nn.functional.normalize.
#pragma once

#include "loss/matrix.hpp"

namespace infonce::loss {

inline constexpr double kNormalizeEps = 1e-12;

// features: N x F, weight: D x F -> embeddings N x D.
template <class Scalar>
Matrix<Scalar> encode(const Matrix<Scalar>& weight, const Matrix<Scalar>& features, bool normalize);

// dL/dW (D x F) given dL/dE (N x D) for the same features.
template <class Scalar>
Matrix<Scalar> encode_backward(const Matrix<Scalar>& weight, const Matrix<Scalar>& features,
                               bool normalize, const Matrix<Scalar>& grad_embeddings);

// |dL/dY|^T |X| with Y = X W^T: for each entry of dL/dW, the sum of the
// absolute values of the terms it adds up. Any other summation order of the
// same terms differs from encode_backward by at most ~n * eps times this, so
// it is the scale against which two correctly computed gradients compare
// when the terms cancel.
template <class Scalar>
Matrix<Scalar> encode_backward_magnitude(const Matrix<Scalar>& weight,
                                         const Matrix<Scalar>& features, bool normalize,
                                         const Matrix<Scalar>& grad_embeddings);

}  // namespace infonce::loss
