#include "properties/siglip_scales.hpp"

#include <algorithm>
#include <cmath>

#include "base/assert.hpp"
#include "properties/embedding_norm.hpp"

namespace infonce::properties {

SigLipScales siglip_cancellation_scales(const Case& c) {
  INFONCE_ASSERT(c.siglip.has_value());
  const SigLipSettings& siglip = *c.siglip;
  const Eigen::Index image = siglip.image_features;
  double max_norm = 0;
  double max_embedding = 0;  // as the logits see it (embedding_norm)
  double feature_abs_sum = 0;
  std::int64_t largest_micro_step = 0;
  for (std::int32_t m = 0; m < c.micro_steps_run(); ++m) {
    std::int64_t pairs = 0;
    for (const TowerPairBatch& shard : siglip.batches[static_cast<std::size_t>(m)]) {
      pairs += shard.image.rows();
      for (Eigen::Index r = 0; r < shard.image.rows(); ++r) {
        const double image_norm =
            (c.weight.leftCols(image) * shard.image.row(r).transpose()).norm();
        const double text_norm =
            (c.weight.rightCols(c.weight.cols() - image) * shard.text.row(r).transpose()).norm();
        max_norm = std::max({max_norm, encoder_row_factor(image_norm, siglip.image_normalize),
                             encoder_row_factor(text_norm, siglip.text_normalize)});
        max_embedding = std::max({max_embedding, embedding_norm(image_norm, siglip.image_normalize),
                                  embedding_norm(text_norm, siglip.text_normalize)});
      }
      feature_abs_sum =
          std::max({feature_abs_sum, shard.image.cwiseAbs().colwise().sum().maxCoeff(),
                    shard.text.cwiseAbs().colwise().sum().maxCoeff()});
    }
    largest_micro_step = std::max(largest_micro_step, pairs);
  }
  const double factor = std::exp(siglip.log_scale);
  const double copies = static_cast<double>(largest_micro_step) * c.mesh.dp;
  SigLipScales out;
  out.largest_logit = factor * std::max(max_embedding * max_embedding, 1.0) + std::abs(siglip.bias);
  out.encoders = 4.0 * factor * max_norm * feature_abs_sum * copies;
  out.log_scale = 4.0 * factor * max_embedding * max_embedding * copies;
  out.bias = 4.0 * copies;
  return out;
}

}  // namespace infonce::properties
