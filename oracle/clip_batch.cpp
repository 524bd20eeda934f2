#include "oracle/clip_batch.hpp"

#include "oracle/tower_pair_batches.hpp"

namespace infonce::oracle {

std::vector<ClipBatch> clip_batches(const ClipDescription& description) {
  check_tower_weights(description.image_weight, description.text_weight, description.log_scale,
                      "clip");
  if (description.bias) require_finite_parameter(*description.bias, "clip", "bias");
  return tower_pair_batches(description.micro_steps, description.image_weight,
                            description.text_weight, "clip");
}

}  // namespace infonce::oracle
