// The full-batch reference of a two-tower case (CLIP, SigLIP): for each
// micro-step the family's objective over the union of every DP shard's pairs
// (step/tower_pair_rows.hpp), in Scalar, scaled by 1/A with GA normalisation
// and summed over micro-steps in double; the towers' gradients laid out as
// Case::weight (image columns first), then log_scale and, when the case has
// it, the bias. Every rank reports the full-batch value.
#pragma once

#include <vector>

#include "casefile/case.hpp"
#include "loss/tower_pair_full_batch.hpp"
#include "step/run_case.hpp"
#include "step/tower_pair_rows.hpp"

namespace infonce::step {

// `full_batch(towers, image_rows, text_rows)`: the family's
// loss::TowerPairFullBatchResult<Scalar> (clip_full_batch, siglip_full_batch).
template <class Scalar, class FullBatch>
ReferenceValues tower_pair_reference(const Case& c,
                                     const std::vector<std::vector<TowerPairBatch>>& batches,
                                     const loss::ClipTowers& towers, const FullBatch& full_batch) {
  const std::int32_t micro_steps = c.micro_steps_run();
  const double micro_scale = c.accumulation_normalize ? 1.0 / micro_steps : 1.0;
  ReferenceValues out;
  out.grad = Matrix<double>::Zero(c.weight.rows(), c.weight.cols());
  out.grad_magnitude = Matrix<double>::Zero(c.weight.rows(), c.weight.cols());
  const std::size_t direct = direct_parameter_count(c);
  out.direct_grad.assign(direct, 0.0);
  out.direct_magnitude.assign(direct, 0.0);
  for (std::int32_t m = 0; m < micro_steps; ++m) {
    const auto& shards = batches[static_cast<std::size_t>(m)];
    const loss::TowerPairFullBatchResult<Scalar> step = full_batch(
        towers, tower_pair_union_rows(shards, true), tower_pair_union_rows(shards, false));
    // Each micro-step in Scalar; their sum in double.
    out.loss += static_cast<double>(static_cast<Scalar>(micro_scale) * step.loss);
    Matrix<double> grad(c.weight.rows(), c.weight.cols());
    grad << step.grad_image_weight.template cast<double>(),
        step.grad_text_weight.template cast<double>();
    Matrix<double> magnitude(c.weight.rows(), c.weight.cols());
    magnitude << step.grad_image_weight_magnitude.template cast<double>(),
        step.grad_text_weight_magnitude.template cast<double>();
    out.grad += micro_scale * grad;
    out.grad_magnitude += micro_scale * magnitude;
    out.direct_grad[0] += micro_scale * static_cast<double>(step.grad_log_scale);
    out.direct_magnitude[0] += micro_scale * static_cast<double>(step.grad_log_scale_magnitude);
    if (direct == 2) {
      out.direct_grad[1] += micro_scale * static_cast<double>(step.grad_bias);
      out.direct_magnitude[1] += micro_scale * static_cast<double>(step.grad_bias_magnitude);
    }
  }
  out.shard_losses.assign(static_cast<std::size_t>(c.mesh.dp), out.loss);
  return out;
}

// The towers of Case::weight split at `image_features` columns.
inline loss::ClipTowers tower_pair_towers(const Case& c, Eigen::Index image_features,
                                          bool image_normalize, bool text_normalize) {
  return {c.weight.leftCols(image_features), image_normalize,
          c.weight.rightCols(c.weight.cols() - image_features), text_normalize};
}

}  // namespace infonce::step
