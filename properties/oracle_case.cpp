#include "properties/oracle_case.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "casefile/tower_pair_batch.hpp"
#include "oracle/clip_objective.hpp"
#include "oracle/ntxent_objective.hpp"
#include "oracle/objective.hpp"
#include "oracle/siglip_objective.hpp"
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
  out.padding =
      s.padding == loss::Padding::legacy ? oracle::PaddingRow::legacy : oracle::PaddingRow::fixed;
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
  d.learnable_temperature = c.learnable_temperature;
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

namespace {

// What CLIP's and SigLIP's descriptions read alike from their settings (same
// field names): the towers, their pairs per micro-step that runs, and A.
template <class Settings, class TowerPairDescription>
void describe_towers(const Case& c, const Settings& towers, TowerPairDescription& d) {
  const Eigen::Index image = towers.image_features;
  d.image_weight = input_rows(c.weight.leftCols(image), c.scalar);
  d.image_normalize = towers.image_normalize;
  d.text_weight = input_rows(c.weight.rightCols(c.weight.cols() - image), c.scalar);
  d.text_normalize = towers.text_normalize;
  d.accumulation_normalize = c.accumulation_normalize;
  for (std::int32_t m = 0; m < c.micro_steps_run(); ++m) {
    std::vector<oracle::ClipShardInput>& micro = d.micro_steps.emplace_back();
    for (const TowerPairBatch& shard : towers.batches[static_cast<std::size_t>(m)]) {
      micro.push_back({input_rows(shard.image, c.scalar), input_rows(shard.text, c.scalar)});
    }
  }
}

}  // namespace

oracle::ClipDescription oracle_clip_description(const Case& c) {
  const ClipSettings& clip = *c.clip;
  oracle::ClipDescription d;
  describe_towers(c, clip, d);
  d.log_scale = clip.log_logit_scale;
  if (clip.logit_bias) d.bias = *clip.logit_bias;
  return d;
}

oracle::NtXentDescription oracle_ntxent_description(const Case& c) {
  const NtXentSettings& ntxent = *c.ntxent;
  oracle::NtXentDescription d;
  d.weight = input_rows(c.weight, c.scalar);
  d.normalize = ntxent.normalize;
  d.temperature = ntxent.temperature;
  d.learnable_temperature = c.learnable_temperature;
  d.accumulation_normalize = c.accumulation_normalize;
  for (std::int32_t m = 0; m < c.micro_steps_run(); ++m) {
    std::vector<oracle::NtXentShardInput>& micro = d.micro_steps.emplace_back();
    for (const NtXentShardBatch& shard : ntxent.batches[static_cast<std::size_t>(m)]) {
      micro.push_back({input_rows(shard.first, c.scalar), input_rows(shard.second, c.scalar)});
    }
  }
  return d;
}

oracle::SigLipDescription oracle_siglip_description(const Case& c) {
  const SigLipSettings& siglip = *c.siglip;
  oracle::SigLipDescription d;
  describe_towers(c, siglip, d);
  d.log_scale = siglip.log_scale;
  d.bias = siglip.bias;
  return d;
}

namespace {

OracleValues ntxent_oracle_values(const Case& c) {
  const oracle::NtXentResult r = oracle::evaluate_ntxent(oracle_ntxent_description(c));
  OracleValues out;
  out.max_abs_logit = static_cast<double>(r.max_abs_logit);
  out.max_encoding_condition = static_cast<double>(r.max_encoding_condition);
  out.min_mask_gap = INFINITY;  // no mask
  out.grad_bound = to_double(r.grad_weight_bound);
  out.logit_factor = 1 / c.ntxent->temperature;
  step::ReferenceValues& values = out.values;
  values.loss = static_cast<double>(r.loss);
  values.shard_losses.assign(static_cast<std::size_t>(c.mesh.dp), values.loss);
  values.grad = to_double(r.grad_weight);
  values.grad_magnitude = to_double(r.grad_weight_magnitude);
  if (c.learnable_temperature) {
    values.direct_grad = {static_cast<double>(r.grad_inverse_temperature)};
    values.direct_magnitude = {static_cast<double>(r.grad_inverse_temperature_magnitude)};
    out.direct_bound = {static_cast<double>(r.grad_inverse_temperature_bound)};
    out.direct_is_log_scale = {false};
  }
  return out;
}

// The towers side by side, as Case::weight lays them out.
Matrix<double> side_by_side(const oracle::RealRows& image, const oracle::RealRows& text) {
  Matrix<double> out(image.rows(), image.cols() + text.cols());
  out << to_double(image), to_double(text);
  return out;
}

// The pairs of the largest micro-step that runs (CLIP's and SigLIP's batches).
double largest_micro_step(const std::vector<std::vector<TowerPairBatch>>& batches,
                          std::int32_t micro_steps) {
  double largest = 0;
  for (std::int32_t m = 0; m < micro_steps; ++m) {
    double pairs = 0;
    for (const TowerPairBatch& shard : batches[static_cast<std::size_t>(m)]) {
      pairs += static_cast<double>(shard.image.rows());
    }
    largest = std::max(largest, pairs);
  }
  return largest;
}

// What CLIP's and SigLIP's oracle results give alike (their fields have the
// same names and meanings): the towers side by side, and the log scale as the
// first direct parameter. `log_scale`: the case's, exp of which scales a logit.
template <class TowerPairResult>
OracleValues tower_pair_oracle_values(const Case& c, const TowerPairResult& r, double log_scale) {
  OracleValues out;
  out.max_abs_logit = static_cast<double>(r.max_abs_logit);
  out.max_encoding_condition = static_cast<double>(r.max_encoding_condition);
  out.min_mask_gap = INFINITY;  // no mask
  out.grad_bound = side_by_side(r.grad_image_bound, r.grad_text_bound);
  out.logit_factor = std::exp(log_scale);
  out.max_logit_magnitude = static_cast<double>(r.max_logit_magnitude);
  out.logit_gradient_bound = static_cast<double>(r.logit_gradient_bound);
  step::ReferenceValues& values = out.values;
  values.loss = static_cast<double>(r.loss);
  values.shard_losses.assign(static_cast<std::size_t>(c.mesh.dp), values.loss);
  values.grad = side_by_side(r.grad_image_weight, r.grad_text_weight);
  values.grad_magnitude = side_by_side(r.grad_image_magnitude, r.grad_text_magnitude);
  values.direct_grad = {static_cast<double>(r.grad_log_scale)};
  values.direct_magnitude = {static_cast<double>(r.grad_log_scale_magnitude)};
  out.direct_bound = {static_cast<double>(r.grad_log_scale_bound)};
  out.direct_is_log_scale = {true};
  return out;
}

// The bias as the next direct parameter (not a log scale).
template <class TowerPairResult>
void add_bias_parameter(const TowerPairResult& r, OracleValues& out) {
  out.values.direct_grad.push_back(static_cast<double>(r.grad_bias));
  out.values.direct_magnitude.push_back(static_cast<double>(r.grad_bias_magnitude));
  out.direct_bound.push_back(static_cast<double>(r.grad_bias_bound));
  out.direct_is_log_scale.push_back(false);
}

OracleValues siglip_oracle_values(const Case& c) {
  const oracle::SigLipResult r = oracle::evaluate_siglip(oracle_siglip_description(c));
  OracleValues out = tower_pair_oracle_values(c, r, c.siglip->log_scale);
  add_bias_parameter(r, out);
  const double pairs = largest_micro_step(c.siglip->batches, c.micro_steps_run());
  out.loss_terms = pairs * pairs + c.micro_steps_run();
  out.direct_terms = out.loss_terms;
  return out;
}

OracleValues clip_oracle_values(const Case& c) {
  const oracle::ClipResult r = oracle::evaluate_clip(oracle_clip_description(c));
  OracleValues out = tower_pair_oracle_values(c, r, c.clip->log_logit_scale);
  if (c.clip->logit_bias) add_bias_parameter(r, out);
  const double pairs = largest_micro_step(c.clip->batches, c.micro_steps_run());
  out.loss_terms = 2 * pairs + c.micro_steps_run();
  out.direct_terms = 2 * pairs * pairs + c.micro_steps_run();
  return out;
}

}  // namespace

OracleValues oracle_values(const Case& c) {
  if (c.clip) return clip_oracle_values(c);
  if (c.ntxent) return ntxent_oracle_values(c);
  if (c.siglip) return siglip_oracle_values(c);
  const oracle::Result r = oracle::evaluate(oracle_description(c, step::record_padding_draws(c)));
  OracleValues out;
  out.max_abs_logit = static_cast<double>(r.max_abs_logit);
  out.max_encoding_condition = static_cast<double>(r.max_encoding_condition);
  out.min_mask_gap = static_cast<double>(r.min_mask_gap);
  out.grad_bound = to_double(r.grad_bound);
  step::ReferenceValues& values = out.values;
  values.loss = static_cast<double>(r.loss);
  for (const oracle::Real loss : r.shard_losses)
    values.shard_losses.push_back(static_cast<double>(loss));
  values.grad = to_double(r.grad);
  values.grad_magnitude = to_double(r.grad_magnitude);
  out.logit_factor = 1 / c.loss.temperature;
  if (c.learnable_temperature) {
    values.direct_grad = {static_cast<double>(r.grad_inverse_temperature)};
    values.direct_magnitude = {static_cast<double>(r.grad_inverse_temperature_magnitude)};
    out.direct_bound = {static_cast<double>(r.grad_inverse_temperature_bound)};
    out.direct_is_log_scale = {false};
  }
  return out;
}

}  // namespace infonce::properties
