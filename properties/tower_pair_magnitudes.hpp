// The sizes a two-tower case's rounding bounds start from (CLIP's in
// strategy_campaign.cpp, SigLIP's in siglip_scales.hpp): one pass over the
// pairs of the micro-steps run, the family's own bound built on top.
#pragma once

#include <cstdint>
#include <vector>

#include "casefile/case.hpp"

namespace infonce::properties {

struct TowerPairMagnitudes {
  double max_norm = 0;                  // the largest encoder_row_factor of a tower's row
  double max_embedding = 0;             // the largest embedding_norm: as the logits see it
  double feature_abs_sum = 0;           // the largest column sum of |x| over a shard's rows
  std::int64_t pairs = 0;               // over all micro-steps run
  std::int64_t largest_micro_step = 0;  // the most pairs of one micro-step
};

// `batches` [micro][dp shard] split at `image_features` columns of c.weight,
// each tower normalised as its flag says.
TowerPairMagnitudes tower_pair_magnitudes(const Case& c,
                                          const std::vector<std::vector<TowerPairBatch>>& batches,
                                          Eigen::Index image_features, bool image_normalize,
                                          bool text_normalize);

}  // namespace infonce::properties
