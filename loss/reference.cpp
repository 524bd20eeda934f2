#include "loss/reference.hpp"

#include <algorithm>
#include <string>

#include "base/error.hpp"
#include "loss/encoder.hpp"
#include "loss/groups.hpp"
#include "loss/infonce.hpp"
#include "loss/learnable_temperature.hpp"

namespace infonce::loss {

namespace {

std::string shard_key(std::size_t micro, std::size_t shard) {
  return "micro_batches[" + std::to_string(micro) + "][" + std::to_string(shard) + "]";
}

// Rows a batch of groups [q, p, n_1..n_k] occupies.
std::int64_t rows_needed(const std::vector<std::int32_t>& negative_counts) {
  std::int64_t rows = 0;
  for (const std::int32_t k : negative_counts) rows += std::int64_t{k} + 2;
  return rows;
}

void check_problem(const ReferenceProblem& problem) {
  if (problem.micro_batches.empty())
    throw InputError("micro_batches: need at least one micro-step");
  const std::size_t shards = problem.micro_batches.front().size();
  if (shards == 0) throw InputError("micro_batches[0]: need at least one data shard");
  for (std::size_t m = 0; m < problem.micro_batches.size(); ++m) {
    if (problem.micro_batches[m].size() != shards) {
      throw InputError("micro_batches[" + std::to_string(m) + "]: has " +
                       std::to_string(problem.micro_batches[m].size()) +
                       " shards, micro-step 0 has " + std::to_string(shards));
    }
    for (std::size_t d = 0; d < shards; ++d) {
      const ShardBatch& batch = problem.micro_batches[m][d];
      if (batch.features.rows() != rows_needed(batch.negative_counts)) {
        throw InputError(shard_key(m, d) + ": features have " +
                         std::to_string(batch.features.rows()) + " rows, the groups need " +
                         std::to_string(rows_needed(batch.negative_counts)));
      }
      if (batch.features.rows() > 0 && batch.features.cols() != problem.weight.cols()) {
        throw InputError(shard_key(m, d) + ": features have " +
                         std::to_string(batch.features.cols()) + " columns, the weight has " +
                         std::to_string(problem.weight.cols()));
      }
    }
  }
}

template <class Scalar>
struct BatchResult {
  Scalar loss;
  Matrix<Scalar> grad;  // d loss / dW
  Matrix<Scalar> grad_magnitude;
  InverseTemperatureGradient<Scalar> inverse_temperature;  // learnable_temperature only
};

// One loss evaluation of SPEC section 2 on a batch of groups: encode, parse
// the layout from the labels (as the trainer does), resize, loss, backward.
template <class Scalar>
BatchResult<Scalar> batch_loss(const Matrix<Scalar>& weight, const Matrix<Scalar>& features,
                               const std::vector<std::int32_t>& negative_counts,
                               const ReferenceProblem& problem, PaddingPlan& padding,
                               std::int32_t micro, std::int32_t stream) {
  const LossSettings& settings = problem.settings;
  const Matrix<Scalar> embeddings = encode(weight, features, problem.normalize);
  const std::vector<std::uint8_t> labels = labels_for_negative_counts(negative_counts);
  GroupLayout layout = parse_groups(labels, static_cast<std::int32_t>(embeddings.rows()));
  if (settings.hard_negatives.has_value()) {
    layout = resize_hard_negatives(layout, *settings.hard_negatives, settings.padding,
                                   padding.source(micro, stream));
  }
  const LossAndGradient<Scalar> result = infonce_loss_and_gradient(embeddings, layout, settings);
  BatchResult<Scalar> out{
      result.loss,
      encode_backward(weight, features, problem.normalize, result.grad_embeddings),
      encode_backward_magnitude(weight, features, problem.normalize, result.grad_embeddings),
      {}};
  if (problem.learnable_temperature) {
    out.inverse_temperature = inverse_temperature_gradient(embeddings, result.grad_embeddings,
                                                           1.0 / settings.temperature);
  }
  return out;
}

// Features of every shard of one micro-step stacked in shard order, and
// their groups' negative counts: the batch the gathered loss sees.
template <class Scalar>
Matrix<Scalar> union_features(const std::vector<ShardBatch>& shards, Eigen::Index feature_dim,
                              std::vector<std::int32_t>& negative_counts) {
  Eigen::Index rows = 0;
  for (const ShardBatch& shard : shards) rows += shard.features.rows();
  Matrix<Scalar> features(rows, feature_dim);
  Eigen::Index next = 0;
  negative_counts.clear();
  for (const ShardBatch& shard : shards) {
    if (shard.features.rows() > 0) {
      features.middleRows(next, shard.features.rows()) = shard.features.template cast<Scalar>();
    }
    next += shard.features.rows();
    negative_counts.insert(negative_counts.end(), shard.negative_counts.begin(),
                           shard.negative_counts.end());
  }
  return features;
}

}  // namespace

template <class Scalar>
ReferenceResult<Scalar> compute_reference(const ReferenceProblem& problem, PaddingPlan& padding) {
  check_problem(problem);
  const Matrix<Scalar> weight = problem.weight.template cast<Scalar>();
  const std::size_t micro_steps = problem.micro_batches.size();
  const std::size_t shards = problem.micro_batches.front().size();
  // GA normalisation: each micro-step's loss is divided by A.
  const Scalar micro_scale =
      problem.accumulation_normalize ? Scalar(1) / static_cast<Scalar>(micro_steps) : Scalar(1);

  ReferenceResult<Scalar> result{Scalar(0),
                                 std::vector<Scalar>(shards, Scalar(0)),
                                 Matrix<Scalar>::Zero(weight.rows(), weight.cols()),
                                 Matrix<Scalar>::Zero(weight.rows(), weight.cols()),
                                 {},
                                 {}};
  if (problem.learnable_temperature) {
    result.direct_grad.assign(1, Scalar(0));
    result.direct_magnitude.assign(1, Scalar(0));
  }
  // Adds `step`'s direct gradients, weighted.
  const auto add_direct = [&](const BatchResult<Scalar>& step, Scalar weight_of_step) {
    if (!problem.learnable_temperature) return;
    result.direct_grad[0] += weight_of_step * step.inverse_temperature.value;
    result.direct_magnitude[0] += weight_of_step * step.inverse_temperature.magnitude;
  };
  std::vector<std::int32_t> negative_counts;
  for (std::size_t m = 0; m < micro_steps; ++m) {
    const auto micro = static_cast<std::int32_t>(m);
    const std::vector<ShardBatch>& batches = problem.micro_batches[m];
    if (problem.settings.use_batch) {
      // Negatives cross shards but never micro-steps; stream 0 pads the union.
      const Matrix<Scalar> features =
          union_features<Scalar>(batches, weight.cols(), negative_counts);
      const BatchResult<Scalar> step =
          batch_loss(weight, features, negative_counts, problem, padding, micro, 0);
      result.loss += micro_scale * step.loss;
      result.grad += micro_scale * step.grad;
      result.grad_magnitude += micro_scale * step.grad_magnitude;
      add_direct(step, micro_scale);
      continue;
    }
    // Without use_batch each shard averages its own groups; DDP then averages
    // (or, under a summing reduction, adds) the shards.
    const Scalar shard_weight =
        problem.sum_over_shards ? Scalar(1) : Scalar(1) / static_cast<Scalar>(shards);
    for (std::size_t d = 0; d < shards; ++d) {
      const ShardBatch& batch = batches[d];
      if (batch.negative_counts.empty()) {
        throw InputError(shard_key(m, d) +
                         ": a shard with no groups has no loss when use_batch is false");
      }
      const BatchResult<Scalar> step =
          batch_loss(weight, Matrix<Scalar>(batch.features.template cast<Scalar>()),
                     batch.negative_counts, problem, padding, micro, static_cast<std::int32_t>(d));
      result.shard_losses[d] += micro_scale * step.loss;
      result.loss += shard_weight * micro_scale * step.loss;
      result.grad += (shard_weight * micro_scale) * step.grad;
      result.grad_magnitude += (shard_weight * micro_scale) * step.grad_magnitude;
      add_direct(step, shard_weight * micro_scale);
    }
  }
  if (problem.settings.use_batch) {
    // Every rank reports the global value.
    std::fill(result.shard_losses.begin(), result.shard_losses.end(), result.loss);
  }
  return result;
}

template ReferenceResult<float> compute_reference(const ReferenceProblem&, PaddingPlan&);
template ReferenceResult<double> compute_reference(const ReferenceProblem&, PaddingPlan&);
template ReferenceResult<long double> compute_reference(const ReferenceProblem&, PaddingPlan&);

}  // namespace infonce::loss
