#include "oracle/siglip_objective.hpp"

#include <cmath>
#include <string>

#include "base/error.hpp"
#include "oracle/siglip_loss_backward.hpp"
#include "oracle/tower_pair_objective.hpp"

namespace infonce::oracle {
namespace {

void require_finite(const RealRows& rows, const std::string& what) {
  if (!rows.allFinite()) throw InputError("oracle: siglip " + what + " is not finite");
}

void require_finite(Real value, const std::string& what) {
  if (!std::isfinite(value)) throw InputError("oracle: siglip " + what + " is not finite");
}

void check_parameters(const SigLipDescription& description) {
  const RealRows& image = description.image_weight;
  const RealRows& text = description.text_weight;
  if (image.rows() == 0 || image.cols() == 0 || text.rows() == 0 || text.cols() == 0) {
    throw InputError("oracle: siglip weights must be D x F with D, F >= 1");
  }
  if (image.rows() != text.rows()) {
    throw InputError("oracle: siglip towers embed in D = " + std::to_string(image.rows()) +
                     " and " + std::to_string(text.rows()));
  }
  require_finite(image, "image_weight");
  require_finite(text, "text_weight");
  require_finite(description.log_scale, "log_scale");
  require_finite(std::exp(description.log_scale), "exp(log_scale)");
  require_finite(description.bias, "bias");
}

ClipBatch checked_union(const SigLipDescription& description,
                        const std::vector<ClipShardInput>& shards, const std::string& micro) {
  if (shards.empty()) throw InputError("oracle: siglip " + micro + " has no shards");
  Eigen::Index pairs = 0;
  for (std::size_t d = 0; d < shards.size(); ++d) {
    const ClipShardInput& shard = shards[d];
    const std::string where = micro + " shard " + std::to_string(d);
    if (shard.image.rows() == 0) throw InputError("oracle: siglip " + where + " has no pairs");
    if (shard.image.rows() != shard.text.rows()) {
      throw InputError("oracle: siglip " + where + " has " + std::to_string(shard.image.rows()) +
                       " image rows and " + std::to_string(shard.text.rows()) + " text rows");
    }
    if (shard.image.cols() != description.image_weight.cols() ||
        shard.text.cols() != description.text_weight.cols()) {
      throw InputError("oracle: siglip " + where + "'s feature widths are not the towers'");
    }
    require_finite(shard.image, where + " image");
    require_finite(shard.text, where + " text");
    pairs += shard.image.rows();
  }
  ClipBatch batch{RealRows(pairs, shards[0].image.cols()), RealRows(pairs, shards[0].text.cols())};
  pairs = 0;
  for (const ClipShardInput& shard : shards) {
    batch.image.middleRows(pairs, shard.image.rows()) = shard.image;
    batch.text.middleRows(pairs, shard.text.rows()) = shard.text;
    pairs += shard.image.rows();
  }
  return batch;
}

}  // namespace

std::vector<ClipBatch> siglip_batches(const SigLipDescription& description) {
  check_parameters(description);
  if (description.micro_steps.empty()) throw InputError("oracle: siglip case has no micro-steps");
  std::vector<ClipBatch> batches;
  for (std::size_t m = 0; m < description.micro_steps.size(); ++m) {
    batches.push_back(
        checked_union(description, description.micro_steps[m], "micro-step " + std::to_string(m)));
  }
  return batches;
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
