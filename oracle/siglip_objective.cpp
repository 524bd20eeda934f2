#include "oracle/siglip_objective.hpp"

#include "oracle/siglip_loss_backward.hpp"
#include "oracle/tower_pair_batches.hpp"
#include "oracle/tower_pair_objective.hpp"

namespace infonce::oracle {

std::vector<ClipBatch> siglip_batches(const SigLipDescription& description) {
  check_tower_weights(description.image_weight, description.text_weight, description.log_scale,
                      "siglip");
  require_finite_parameter(description.bias, "siglip", "bias");
  return tower_pair_batches(description.micro_steps, description.image_weight,
                            description.text_weight, "siglip");
}

SigLipResult evaluate_siglip(const SigLipDescription& description) {
  const std::vector<ClipBatch> batches = siglip_batches(description);
  const Real weight = siglip_micro_step_weight(description);
  const auto loss_backward = [&description](const RealRows& image, const RealRows& text) {
    return siglip_batch_loss_backward(image, text, description.log_scale, description.bias);
  };
  auto result = zero_tower_pair_result<SigLipResult>(description);
  for (const ClipBatch& batch : batches) {
    add_tower_pair_micro_step(description, batch, weight, loss_backward, result);
  }
  return result;
}

}  // namespace infonce::oracle
