#include "properties/siglip_scales.hpp"

#include <algorithm>
#include <cmath>

#include "base/assert.hpp"
#include "properties/tower_pair_magnitudes.hpp"

namespace infonce::properties {

SigLipScales siglip_cancellation_scales(const Case& c) {
  INFONCE_ASSERT(c.siglip.has_value());
  const SigLipSettings& siglip = *c.siglip;
  const TowerPairMagnitudes sizes = tower_pair_magnitudes(
      c, siglip.batches, siglip.image_features, siglip.image_normalize, siglip.text_normalize);
  const double factor = std::exp(siglip.log_scale);
  const double copies = static_cast<double>(sizes.largest_micro_step) * c.mesh.dp;
  SigLipScales out;
  out.largest_logit =
      factor * std::max(sizes.max_embedding * sizes.max_embedding, 1.0) + std::abs(siglip.bias);
  out.encoders = 4.0 * factor * sizes.max_norm * sizes.feature_abs_sum * copies;
  out.log_scale = 4.0 * factor * sizes.max_embedding * sizes.max_embedding * copies;
  out.bias = 4.0 * copies;
  return out;
}

}  // namespace infonce::properties
