#include "oracle/tower_pair_batches.hpp"

#include <cmath>

#include "base/error.hpp"

namespace infonce::oracle {
namespace {

void require_finite_rows(const RealRows& rows, const std::string& family, const std::string& what) {
  if (!rows.allFinite()) throw InputError("oracle: " + family + " " + what + " is not finite");
}

void check_shard(const ClipShardInput& shard, const RealRows& image_weight,
                 const RealRows& text_weight, const std::string& family, const std::string& where) {
  const std::string prefix = "oracle: " + family + " " + where;
  if (shard.image.rows() == 0) throw InputError(prefix + " has no pairs");
  if (shard.image.rows() != shard.text.rows()) {
    throw InputError(prefix + " has " + std::to_string(shard.image.rows()) + " image rows and " +
                     std::to_string(shard.text.rows()) + " text rows");
  }
  if (shard.image.cols() != image_weight.cols() || shard.text.cols() != text_weight.cols()) {
    throw InputError(prefix + "'s feature widths are not the towers'");
  }
  require_finite_rows(shard.image, family, where + " image");
  require_finite_rows(shard.text, family, where + " text");
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

void require_finite_parameter(Real value, const std::string& family, const std::string& what) {
  if (!std::isfinite(value)) throw InputError("oracle: " + family + " " + what + " is not finite");
}

void check_tower_weights(const RealRows& image_weight, const RealRows& text_weight, Real log_scale,
                         const std::string& family) {
  const RealRows& image = image_weight;
  const RealRows& text = text_weight;
  if (image.rows() == 0 || image.cols() == 0 || text.rows() == 0 || text.cols() == 0) {
    throw InputError("oracle: " + family + " weights must be D x F with D, F >= 1");
  }
  if (image.rows() != text.rows()) {
    throw InputError("oracle: " + family + " towers embed in D = " + std::to_string(image.rows()) +
                     " and " + std::to_string(text.rows()));
  }
  require_finite_rows(image, family, "image_weight");
  require_finite_rows(text, family, "text_weight");
  require_finite_parameter(log_scale, family, "log_scale");
  require_finite_parameter(std::exp(log_scale), family, "exp(log_scale)");
}

std::vector<ClipBatch> tower_pair_batches(
    const std::vector<std::vector<ClipShardInput>>& micro_steps, const RealRows& image_weight,
    const RealRows& text_weight, const std::string& family) {
  if (micro_steps.empty()) throw InputError("oracle: " + family + " case has no micro-steps");
  std::vector<ClipBatch> batches;
  for (std::size_t m = 0; m < micro_steps.size(); ++m) {
    const std::vector<ClipShardInput>& shards = micro_steps[m];
    const std::string micro = "micro-step " + std::to_string(m);
    if (shards.empty()) throw InputError("oracle: " + family + " " + micro + " has no shards");
    for (std::size_t d = 0; d < shards.size(); ++d) {
      check_shard(shards[d], image_weight, text_weight, family,
                  micro + " shard " + std::to_string(d));
    }
    batches.push_back(concatenate(shards));
  }
  return batches;
}

}  // namespace infonce::oracle
