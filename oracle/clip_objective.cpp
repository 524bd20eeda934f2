#include "oracle/clip_objective.hpp"

#include "oracle/clip_loss_backward.hpp"
#include "oracle/tower_pair_objective.hpp"

namespace infonce::oracle {

ClipResult evaluate_clip(const ClipDescription& description) {
  const std::vector<ClipBatch> batches = clip_batches(description);
  const Real weight = clip_micro_step_weight(description);
  const auto loss_backward = [&description](const RealRows& image, const RealRows& text) {
    return clip_batch_loss_backward(image, text, description.log_scale, description.bias);
  };
  auto result = zero_tower_pair_result<ClipResult>(description);
  for (const ClipBatch& batch : batches) {
    add_tower_pair_micro_step(description, batch, weight, loss_backward, result);
  }
  return result;
}

}  // namespace infonce::oracle
