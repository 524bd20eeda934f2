// The CLIP family of a case (issue 13, point 4): paired image and text rows,
// two towers and the parameters that enter the loss directly. The case file
// holds it under "family": "clip" and the "clip" object (MODEL.md section 7).
//
// The towers' weights live side by side in Case::weight, D x (F_image +
// F_text): the image tower's F_image columns first, then the text tower's.
// So every step reports one flat encoder gradient in that layout (then the
// direct parameters: log_logit_scale, and logit_bias when set), and whatever
// reads a case's D x F gradient reads a CLIP case's towers without knowing
// the family.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "casefile/tower_pair_batch.hpp"
#include "loss/clip.hpp"
#include "loss/matrix.hpp"

namespace infonce {

// The family-named spelling of the shared pair batch, which
// properties/oracle_agrees.cpp still uses.
using ClipShardBatch = TowerPairBatch;

struct ClipSettings {
  std::int32_t image_features = 1;  // F_image: the first columns of Case::weight
  bool image_normalize = true;
  bool text_normalize = true;
  double log_logit_scale = loss::kClipInitialLogScale;  // learnable, stored as its log
  std::optional<double> logit_bias;                     // learnable when set
  std::vector<std::vector<TowerPairBatch>> batches;     // [micro][dp rank]
};

}  // namespace infonce
