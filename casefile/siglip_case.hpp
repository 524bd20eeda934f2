// The SigLIP family of a case (SPEC section 15): paired image and text rows
// as in CLIP (two towers, optional L2 normalisation) scored by a sigmoid per
// pair. The case file holds it under "family": "siglip" and the "siglip"
// object {"image_features", "image_normalize", "text_normalize", "log_scale",
// "bias", "batches"}; the towers' weights are the root "encoder": {"weight"},
// D x (F_image + F_text), the image tower's F_image columns first.
//
// Both direct parameters are always learnable: a step reports the flat
// encoder gradient, then d/d log_scale, then d/d bias.
#pragma once

#include <cstdint>
#include <vector>

#include "casefile/clip_case.hpp"

namespace infonce {

// The family-named spelling of the shared pair batch, which
// properties/oracle_agrees.cpp still uses.
using SigLipShardBatch = TowerPairBatch;

struct SigLipSettings {
  std::int32_t image_features = 1;  // F_image: the first columns of Case::weight
  bool image_normalize = true;
  bool text_normalize = true;
  double log_scale = 2.302585092994046;              // log 10, SigLIP's initial scale
  double bias = -10.0;                               // SigLIP's initial bias
  std::vector<std::vector<TowerPairBatch>> batches;  // [micro][dp rank]
};

}  // namespace infonce
