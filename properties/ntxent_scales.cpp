#include "properties/ntxent_scales.hpp"

#include <algorithm>

#include "base/assert.hpp"

namespace infonce::properties {

NtXentScales ntxent_cancellation_scales(const Case& c) {
  INFONCE_ASSERT(c.ntxent.has_value());
  const NtXentSettings& ntxent = *c.ntxent;
  double max_norm = 0;
  double feature_abs_sum = 0;
  std::int64_t samples = 0;
  for (std::int32_t m = 0; m < c.micro_steps_run(); ++m) {
    for (const NtXentShardBatch& shard : ntxent.batches[static_cast<std::size_t>(m)]) {
      samples += shard.first.rows();
      for (const Matrix<double>* view : {&shard.first, &shard.second}) {
        for (Eigen::Index r = 0; r < view->rows(); ++r) {
          const double norm = (c.weight * view->row(r).transpose()).norm();
          max_norm = std::max(max_norm, ntxent.normalize ? std::min(norm, 1.0) : norm);
        }
        if (view->rows() > 0) {
          feature_abs_sum = std::max(feature_abs_sum, view->cwiseAbs().colwise().sum().maxCoeff());
        }
      }
    }
  }
  NtXentScales out;
  const double factor = 1.0 / ntxent.temperature;
  out.largest_logit = factor * std::max(max_norm * max_norm, 1.0);
  if (samples == 0) return out;
  out.encoders =
      4.0 * factor * max_norm * feature_abs_sum * c.mesh.dp / static_cast<double>(samples);
  out.inverse_temperature = 4.0 * max_norm * max_norm;
  return out;
}

}  // namespace infonce::properties
