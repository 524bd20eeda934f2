#include "oracle/clip_batch.hpp"

#include <cmath>
#include <string>

#include "base/error.hpp"

namespace infonce::oracle {
namespace {

void require_finite(const RealRows& rows, const std::string& what) {
  if (!rows.allFinite()) throw InputError("oracle: clip " + what + " is not finite");
}

void require_finite(Real value, const std::string& what) {
  if (!std::isfinite(value)) throw InputError("oracle: clip " + what + " is not finite");
}

// The parameters: both towers map to one D, and every number is finite
// (exp(log_scale) included: an infinite scale has no logits).
void check_parameters(const ClipDescription& description) {
  const RealRows& image = description.image_weight;
  const RealRows& text = description.text_weight;
  if (image.rows() == 0 || image.cols() == 0 || text.rows() == 0 || text.cols() == 0) {
    throw InputError("oracle: clip weights must be D x F with D, F >= 1");
  }
  if (image.rows() != text.rows()) {
    throw InputError("oracle: clip towers embed in D = " + std::to_string(image.rows()) + " and " +
                     std::to_string(text.rows()));
  }
  require_finite(image, "image_weight");
  require_finite(text, "text_weight");
  require_finite(description.log_scale, "log_scale");
  require_finite(std::exp(description.log_scale), "exp(log_scale)");
  if (description.bias) require_finite(*description.bias, "bias");
}

void check_shard(const ClipDescription& description, const ClipShardInput& shard,
                 const std::string& where) {
  if (shard.image.rows() == 0) throw InputError("oracle: clip " + where + " has no pairs");
  if (shard.image.rows() != shard.text.rows()) {
    throw InputError("oracle: clip " + where + " has " + std::to_string(shard.image.rows()) +
                     " image rows and " + std::to_string(shard.text.rows()) + " text rows");
  }
  if (shard.image.cols() != description.image_weight.cols() ||
      shard.text.cols() != description.text_weight.cols()) {
    throw InputError("oracle: clip " + where + "'s feature widths are not the towers'");
  }
  require_finite(shard.image, where + " image");
  require_finite(shard.text, where + " text");
}

// The shards' rows laid end to end, in shard order.
ClipBatch concatenate(const std::vector<ClipShardInput>& shards) {
  Eigen::Index pairs = 0;
  for (const ClipShardInput& shard : shards) pairs += shard.image.rows();
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

std::vector<ClipBatch> clip_batches(const ClipDescription& description) {
  check_parameters(description);
  if (description.micro_steps.empty()) throw InputError("oracle: clip case has no micro-steps");
  std::vector<ClipBatch> batches;
  for (std::size_t m = 0; m < description.micro_steps.size(); ++m) {
    const std::vector<ClipShardInput>& shards = description.micro_steps[m];
    const std::string micro = "micro-step " + std::to_string(m);
    if (shards.empty()) throw InputError("oracle: clip " + micro + " has no shards");
    for (std::size_t d = 0; d < shards.size(); ++d) {
      check_shard(description, shards[d], micro + " shard " + std::to_string(d));
    }
    batches.push_back(concatenate(shards));
  }
  return batches;
}

}  // namespace infonce::oracle
