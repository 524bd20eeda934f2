// Internal to loss/: the trainer's two implementations of the InfoNCE loss.
// Both take validated input (T > 0 finite, >= 1 group, finite embeddings) and
// return the mean cross-entropy; when `grad` is non-null they also write
// dL/dE into it (already sized N x D and zeroed).
#pragma once

#include <cmath>
#include <limits>
#include <string>

#include "base/error.hpp"
#include "loss/groups.hpp"
#include "loss/infonce.hpp"
#include "loss/matrix.hpp"
#include "loss/ordered_dot.hpp"
#include "loss/settings.hpp"

namespace infonce::loss::detail {

// Batched: stacks the groups (all of one size) and works with matrix products
// over every group at once, like the trainer's `can_batched` branch.
template <class Scalar>
Scalar batched_loss(const Matrix<Scalar>& embeddings, const GroupLayout& layout,
                    const LossSettings& settings, Matrix<Scalar>* grad);

// Loop: one logit vector per group, like the trainer's for-loop branch.
template <class Scalar>
Scalar loop_loss(const Matrix<Scalar>& embeddings, const GroupLayout& layout,
                 const LossSettings& settings, Matrix<Scalar>* grad);

// A rank's local loss (infonce_local.cpp): groups [first_group, first_group +
// group_count) as logit rows against every group's documents (use_batch);
// the mean over them, 0 without a group. `grad` (every role) and
// `grad_query_rows` (only through the own queries as logit rows) are sized
// N x D and zeroed by the caller.
template <class Scalar>
Scalar local_loop_loss(const Matrix<Scalar>& embeddings, const GroupLayout& layout,
                       const LossSettings& settings, std::int32_t first_group,
                       std::int32_t group_count, Matrix<Scalar>& grad,
                       Matrix<Scalar>& grad_query_rows);

// The row maximum of a logit row, checked: all -inf means every logit is
// masked (the trainer's loss would be NaN), +inf or NaN means overflow.
template <class Scalar>
Scalar checked_row_max(Scalar row_max, std::int32_t group) {
  if (row_max == -std::numeric_limits<Scalar>::infinity()) {
    throw InputError("group " + std::to_string(group) + ": every logit is masked");
  }
  if (!std::isfinite(row_max)) {
    throw InputError("group " + std::to_string(group) + ": a similarity overflowed");
  }
  return row_max;
}

template <class Scalar>
constexpr Scalar minus_infinity() {
  return -std::numeric_limits<Scalar>::infinity();
}

}  // namespace infonce::loss::detail
