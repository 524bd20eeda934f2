// InfoNCE forward and exact backward for every mode of MODEL.md section 2.
// Pure math: no ranks, no collectives. Templated on the scalar type.
#pragma once

#include "loss/groups.hpp"
#include "loss/matrix.hpp"
#include "loss/settings.hpp"

namespace infonce::loss {

template <class Scalar>
struct LossAndGradient {
  Scalar loss;
  Matrix<Scalar> grad_embeddings;  // dL/dE, same shape as E
};

// Whether the trainer would take the batched path for this layout.
bool trainer_uses_batched_path(const GroupLayout& layout, const LossSettings& settings);

// Loss of the embeddings E (one row per sentence) under `layout` (already
// resized for hard negatives). `path` batched on a layout it cannot serve
// (unequal group sizes) throws InputError.
template <class Scalar>
Scalar infonce_loss(const Matrix<Scalar>& embeddings, const GroupLayout& layout,
                    const LossSettings& settings, CodePath path = CodePath::automatic);

template <class Scalar>
LossAndGradient<Scalar> infonce_loss_and_gradient(const Matrix<Scalar>& embeddings,
                                                  const GroupLayout& layout,
                                                  const LossSettings& settings,
                                                  CodePath path = CodePath::automatic);

}  // namespace infonce::loss
