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

// A local loss (open_clip's local_loss, MODEL.md section 3.7): only groups
// [first_group, first_group + group_count) of `layout` are logit rows, each
// against every document (and, with include_qq, every query) of the layout,
// targets where the trainer's are; the loss is the mean over those groups.
// No group (group_count 0): loss 0 and gradient 0. use_batch only; always
// the per-group loop.
template <class Scalar>
struct LocalLossAndGradient {
  Scalar loss;
  Matrix<Scalar> grad_embeddings;  // dl/dE through every role of every row
  // The part of grad_embeddings through the own queries as the left operand
  // of their qd and qq logit rows (nonzero only in the own query rows).
  Matrix<Scalar> grad_query_rows;
};

template <class Scalar>
LocalLossAndGradient<Scalar> infonce_local_loss_and_gradient(const Matrix<Scalar>& embeddings,
                                                             const GroupLayout& layout,
                                                             const LossSettings& settings,
                                                             std::int32_t first_group,
                                                             std::int32_t group_count);

}  // namespace infonce::loss
