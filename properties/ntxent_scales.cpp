#include "properties/ntxent_scales.hpp"

#include <algorithm>

#include "base/assert.hpp"
#include "properties/embedding_norm.hpp"

namespace infonce::properties {

NtXentScales ntxent_cancellation_scales(const Case& c) {
  INFONCE_ASSERT(c.ntxent.has_value());
  const NtXentSettings& ntxent = *c.ntxent;
  double max_norm = 0;
  double max_embedding = 0;  // as the logits see it (embedding_norm)
  double feature_abs_sum = 0;
  std::int64_t samples = 0;
  for (std::int32_t m = 0; m < c.micro_steps_run(); ++m) {
    for (const NtXentShardBatch& shard : ntxent.batches[static_cast<std::size_t>(m)]) {
      samples += shard.first.rows();
      for (const Matrix<double>* view : {&shard.first, &shard.second}) {
        for (Eigen::Index r = 0; r < view->rows(); ++r) {
          const double norm = (c.weight * view->row(r).transpose()).norm();
          max_norm = std::max(max_norm, encoder_row_factor(norm, ntxent.normalize));
          max_embedding = std::max(max_embedding, embedding_norm(norm, ntxent.normalize));
        }
        if (view->rows() > 0) {
          feature_abs_sum = std::max(feature_abs_sum, view->cwiseAbs().colwise().sum().maxCoeff());
        }
      }
    }
  }
  NtXentScales out;
  const double factor = 1.0 / ntxent.temperature;
  out.largest_logit = factor * std::max(max_embedding * max_embedding, 1.0);
  if (samples == 0) return out;
  out.encoders =
      4.0 * factor * max_norm * feature_abs_sum * c.mesh.dp / static_cast<double>(samples);
  // d/dtau of a row's log-sum-exp is sum_j p_j s_j: each p_j carries the
  // rounding of its logit, relative u x |logit|, so the terms' rounding grows
  // with the largest logit (float32, T = 0.1, W = P = 56 went past the bound
  // without it in the 1,000,000-case grid).
  out.inverse_temperature = 4.0 * max_embedding * max_embedding * std::max(1.0, out.largest_logit);
  return out;
}

}  // namespace infonce::properties
