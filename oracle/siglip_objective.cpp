#include "oracle/siglip_objective.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "base/error.hpp"
#include "oracle/encoder_backward.hpp"
#include "oracle/logit_magnitude.hpp"
#include "oracle/siglip_loss_backward.hpp"

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

void add_scalar(const ScalarGradient& gradient, Real weight, Real& value, Real& magnitude,
                Real& bound) {
  value += weight * gradient.value;
  magnitude += std::abs(weight) * gradient.magnitude;
  bound += std::abs(weight) * gradient.bound;
}

SigLipResult zero_result(const SigLipDescription& description) {
  SigLipResult result;
  const RealRows& image = description.image_weight;
  const RealRows& text = description.text_weight;
  result.grad_image_weight = RealRows::Zero(image.rows(), image.cols());
  result.grad_image_magnitude = result.grad_image_weight;
  result.grad_image_bound = result.grad_image_weight;
  result.grad_text_weight = RealRows::Zero(text.rows(), text.cols());
  result.grad_text_magnitude = result.grad_text_weight;
  result.grad_text_bound = result.grad_text_weight;
  return result;
}

void add_micro_step(const SigLipDescription& description, const ClipBatch& batch, Real weight,
                    SigLipResult& result) {
  const RealRows image =
      encode<Real>(description.image_weight, batch.image, description.image_normalize);
  const RealRows text =
      encode<Real>(description.text_weight, batch.text, description.text_normalize);
  const SigLipLossAndGradient loss =
      siglip_batch_loss_backward(image, text, description.log_scale, description.bias);
  result.loss += weight * loss.loss;
  result.max_abs_logit = std::max(result.max_abs_logit, loss.max_abs_logit);
  result.logit_gradient_bound += std::abs(weight) * loss.logit_gradient_bound;
  result.max_logit_magnitude = std::max(
      result.max_logit_magnitude,
      max_logit_magnitude(
          encoding_magnitude(description.image_weight, batch.image, description.image_normalize),
          encoding_magnitude(description.text_weight, batch.text, description.text_normalize),
          std::exp(description.log_scale), description.bias));
  result.max_encoding_condition = std::max(
      {result.max_encoding_condition, encoding_condition(description.image_weight, batch.image),
       encoding_condition(description.text_weight, batch.text)});
  add_scalar(loss.log_scale, weight, result.grad_log_scale, result.grad_log_scale_magnitude,
             result.grad_log_scale_bound);
  add_scalar(loss.bias, weight, result.grad_bias, result.grad_bias_magnitude,
             result.grad_bias_bound);
  add_encoder_backward(description.image_weight, batch.image, description.image_normalize,
                       loss.grad_image, weight, result.grad_image_weight,
                       result.grad_image_magnitude);
  add_encoder_backward_bound(description.image_weight, batch.image, description.image_normalize,
                             loss.grad_image_bound, weight, result.grad_image_bound);
  add_encoder_backward(description.text_weight, batch.text, description.text_normalize,
                       loss.grad_text, weight, result.grad_text_weight, result.grad_text_magnitude);
  add_encoder_backward_bound(description.text_weight, batch.text, description.text_normalize,
                             loss.grad_text_bound, weight, result.grad_text_bound);
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
  SigLipResult result = zero_result(description);
  for (const ClipBatch& batch : batches) add_micro_step(description, batch, weight, result);
  return result;
}

}  // namespace infonce::oracle
