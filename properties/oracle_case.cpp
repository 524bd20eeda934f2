#include "properties/oracle_case.hpp"

#include <algorithm>

#include "oracle/objective.hpp"
#include "step/recorded_padding.hpp"

namespace infonce::properties {
namespace {

oracle::Real input_number(double value, ScalarType scalar) {
  return scalar == ScalarType::float32 ? static_cast<oracle::Real>(static_cast<float>(value))
                                       : static_cast<oracle::Real>(value);
}

oracle::RealRows input_rows(const Matrix<double>& m, ScalarType scalar) {
  oracle::RealRows out(m.rows(), m.cols());
  for (Eigen::Index r = 0; r < m.rows(); ++r) {
    for (Eigen::Index c = 0; c < m.cols(); ++c) out(r, c) = input_number(m(r, c), scalar);
  }
  return out;
}

// SPEC section 1: each group contributes [1, 0 x k_g]; the query has no label.
std::vector<std::int32_t> labels_of(const std::vector<std::int32_t>& negative_counts) {
  std::vector<std::int32_t> labels;
  for (const std::int32_t k : negative_counts) {
    labels.push_back(1);
    labels.insert(labels.end(), static_cast<std::size_t>(k), 0);
  }
  return labels;
}

oracle::LossSettings loss_settings(const loss::LossSettings& s) {
  oracle::LossSettings out;
  out.temperature = s.temperature;
  out.use_batch = s.use_batch;
  out.hard_negatives = s.hard_negatives;
  out.padding = s.padding == loss::Padding::legacy ? oracle::PaddingRow::legacy
                                                   : oracle::PaddingRow::fixed;
  out.mask_fake_negative = s.mask_fake_negative;
  out.fake_neg_margin = s.fake_neg_margin;
  out.include_qq = s.include_qq;
  out.include_dd = s.include_dd;
  return out;
}

Matrix<double> to_double(const oracle::RealRows& m) {
  return m.unaryExpr([](oracle::Real x) { return static_cast<double>(x); });
}

}  // namespace

oracle::Description oracle_description(const Case& c, const loss::RecordedDraws& draws) {
  oracle::Description d;
  d.loss = loss_settings(c.loss);
  d.weight = input_rows(c.weight, c.scalar);
  d.normalize = c.encoder_normalize;
  d.accumulation_normalize = c.accumulation_normalize;
  d.sum_over_shards = !c.loss.use_batch && c.reduction == Reduction::sum;
  // Only the micro-steps that run (a partial accumulation window leaves the
  // rest empty): the oracle divides by the number of micro-steps it is given.
  const std::size_t run = static_cast<std::size_t>(c.micro_steps_run());
  for (std::size_t m = 0; m < std::min(run, c.batches.size()); ++m) {
    std::vector<oracle::ShardInput>& micro = d.micro_steps.emplace_back();
    for (const loss::ShardBatch& shard : c.batches[m]) {
      micro.push_back({input_rows(shard.features, c.scalar), labels_of(shard.negative_counts)});
    }
  }
  for (std::size_t m = 0; m < std::min(run, draws.size()); ++m) {
    std::vector<oracle::Draws>& micro = d.draws.emplace_back();
    for (const auto& stream : draws[m]) micro.emplace_back(stream.begin(), stream.end());
  }
  return d;
}

OracleValues oracle_values(const Case& c) {
  const oracle::Result r = oracle::evaluate(oracle_description(c, step::record_padding_draws(c)));
  OracleValues out;
  out.max_abs_logit = static_cast<double>(r.max_abs_logit);
  out.max_encoding_condition = static_cast<double>(r.max_encoding_condition);
  out.min_mask_gap = static_cast<double>(r.min_mask_gap);
  out.grad_bound = to_double(r.grad_bound);
  step::ReferenceValues& values = out.values;
  values.loss = static_cast<double>(r.loss);
  for (const oracle::Real loss : r.shard_losses) values.shard_losses.push_back(static_cast<double>(loss));
  values.grad = to_double(r.grad);
  values.grad_magnitude = to_double(r.grad_magnitude);
  return out;
}

}  // namespace infonce::properties
