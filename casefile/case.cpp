#include "casefile/case.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <string>

#include "base/error.hpp"
#include "base/rng.hpp"
#include "casefile/case_checks.hpp"

namespace infonce {
namespace case_checks {
namespace {

// The shortest text that reads back to the same double ("0.1", not
// "0.10000000000000001"); "inf" for infinity.
std::string real_text(double value) {
  char buffer[32];
  const auto end = std::to_chars(buffer, buffer + sizeof buffer, value).ptr;
  return std::string(buffer, end);
}

std::string number_text(std::int64_t value) {
  return std::to_string(value);
}

void check_at_least(std::string_view path, std::int64_t value, std::int64_t minimum) {
  if (value < minimum) {
    fail(path, "must be >= " + number_text(minimum) + ", got " + number_text(value));
  }
}

void check_at_most(std::string_view path, std::int64_t value, std::int64_t limit) {
  if (value > limit) {
    fail(path, number_text(value) + " is above the limit " + number_text(limit));
  }
}

void check_finite(std::string_view path, double value) {
  if (!std::isfinite(value)) fail(path, "expected a finite number, got " + real_text(value));
}

// Row r of `matrix` at "path[r][j]", or the first non-finite entry.
void check_finite_rows(std::string_view path, const Matrix<double>& matrix) {
  for (Eigen::Index r = 0; r < matrix.rows(); ++r) {
    for (Eigen::Index j = 0; j < matrix.cols(); ++j) {
      check_finite(index_path(index_path(path, r), j), matrix(r, j));
    }
  }
}

// Negatives of group g after `hard_negatives` resizing.
std::int64_t resized_negatives(std::int32_t negatives, const loss::LossSettings& settings) {
  return settings.hard_negatives ? *settings.hard_negatives : negatives;
}

void check_group_counts(std::string_view shard_path, const loss::ShardBatch& shard,
                        const loss::LossSettings& settings) {
  const auto groups = static_cast<std::int64_t>(shard.negative_counts.size());
  if (groups > CaseLimits::kMaxGroupsPerShard) {
    fail(shard_path, number_text(groups) + " groups, above the limit " +
                         number_text(std::int64_t{CaseLimits::kMaxGroupsPerShard}));
  }
  for (std::int64_t g = 0; g < groups; ++g) {
    const std::string group_path = index_path(shard_path, g);
    const std::int32_t negatives = shard.negative_counts[static_cast<std::size_t>(g)];
    if (negatives < 0) {
      fail(group_path,
           "a group needs at least 2 rows (q, p), got " + number_text(std::int64_t{negatives} + 2));
    }
    if (negatives > CaseLimits::kMaxNegatives) {
      fail(group_path, number_text(std::int64_t{negatives}) + " negatives, above the limit " +
                           number_text(std::int64_t{CaseLimits::kMaxNegatives}));
    }
    if (settings.hard_negatives && negatives == 0) {
      // The trainer asserts `negatives > 0` before resizing.
      fail(group_path, "loss.hard_negatives needs >= 1 negative per group, this group has none");
    }
  }
}

// Names the offending number by group and row, as the file spells it.
void check_shard_features(std::string_view shard_path, const loss::ShardBatch& shard,
                          std::int32_t feature_dim) {
  std::int64_t expected_rows = 0;
  for (const std::int32_t negatives : shard.negative_counts) expected_rows += negatives + 2;
  if (shard.features.rows() != expected_rows) {
    fail(shard_path, "features have " + number_text(std::int64_t{shard.features.rows()}) +
                         " rows, the groups need " + number_text(expected_rows));
  }
  if (shard.features.rows() > 0 && shard.features.cols() != feature_dim) {
    fail(shard_path, "features have " + number_text(std::int64_t{shard.features.cols()}) +
                         " columns, expected " + number_text(std::int64_t{feature_dim}) +
                         " (F, the columns of encoder.weight)");
  }
  Eigen::Index row = 0;
  for (std::size_t g = 0; g < shard.negative_counts.size(); ++g) {
    const std::string group_path = index_path(shard_path, static_cast<std::int64_t>(g));
    for (std::int32_t i = 0; i < shard.negative_counts[g] + 2; ++i, ++row) {
      const std::string row_path = index_path(group_path, i);
      for (Eigen::Index j = 0; j < shard.features.cols(); ++j) {
        check_finite(index_path(row_path, j), shard.features(row, j));
      }
    }
  }
}

// Logit entries of micro-step m's loss (SPEC section 2), in double: the
// products can exceed 64 bits before the limit rejects them.
double micro_step_logits(const std::vector<loss::ShardBatch>& shards,
                         const loss::LossSettings& settings) {
  double groups = 0;
  double docs = 0;
  for (const loss::ShardBatch& shard : shards) {
    for (const std::int32_t negatives : shard.negative_counts) {
      groups += 1;
      docs += static_cast<double>(resized_negatives(negatives, settings)) + 1;
    }
  }
  if (!settings.use_batch) return docs;
  const double columns =
      docs + (settings.include_qq ? groups : 0.0) + (settings.include_dd ? docs : 0.0);
  return groups * columns;
}

void check_micro_step_has_groups(std::string_view micro_path,
                                 const std::vector<loss::ShardBatch>& shards,
                                 const loss::LossSettings& settings) {
  bool any_group = false;
  for (std::size_t d = 0; d < shards.size(); ++d) {
    const bool has_groups = !shards[d].negative_counts.empty();
    any_group = any_group || has_groups;
    if (!settings.use_batch && !has_groups) {
      fail(index_path(micro_path, static_cast<std::int64_t>(d)),
           "no group: without loss.use_batch each rank's loss is the mean over its own groups");
    }
  }
  if (!any_group) {
    fail(micro_path, "no DP shard has a group: the loss of an empty batch is undefined");
  }
}

}  // namespace

void fail(std::string_view path, std::string_view problem) {
  std::string message(path);
  message += ": ";
  message += problem;
  throw InputError(message);
}

std::string index_path(std::string_view path, std::int64_t index) {
  std::string result(path);
  result += '[';
  result += std::to_string(index);
  result += ']';
  return result;
}

void check_mesh(const Mesh& mesh) {
  check_at_least("mesh.world", mesh.world, 1);
  check_at_most("mesh.world", mesh.world, CaseLimits::kMaxWorld);
  check_at_least("mesh.dp", mesh.dp, 1);
  if (mesh.world % mesh.dp != 0) {
    fail("mesh.dp", number_text(std::int64_t{mesh.dp}) +
                        " does not divide mesh.world = " + number_text(std::int64_t{mesh.world}));
  }
}

void check_loss_settings(const loss::LossSettings& settings) {
  check_finite("loss.temperature", settings.temperature);
  if (!(settings.temperature > 0)) {
    fail("loss.temperature", "must be > 0, got " + real_text(settings.temperature));
  }
  check_finite("loss.fake_neg_margin", settings.fake_neg_margin);
  if (settings.hard_negatives) {
    check_at_least("loss.hard_negatives", *settings.hard_negatives, 1);
    check_at_most("loss.hard_negatives", *settings.hard_negatives, CaseLimits::kMaxNegatives);
  }
}

void check_weight(const Matrix<double>& weight) {
  if (weight.rows() < 1) fail("encoder.weight", "expected at least 1 row (D >= 1)");
  if (weight.rows() > CaseLimits::kMaxDim) {
    fail("encoder.weight", number_text(std::int64_t{weight.rows()}) +
                               " rows (D), above the limit " +
                               number_text(std::int64_t{CaseLimits::kMaxDim}));
  }
  if (weight.cols() < 1) fail("encoder.weight[0]", "expected at least 1 number (F >= 1)");
  if (weight.cols() > CaseLimits::kMaxDim) {
    fail("encoder.weight[0]", number_text(std::int64_t{weight.cols()}) +
                                  " numbers (F), above the limit " +
                                  number_text(std::int64_t{CaseLimits::kMaxDim}));
  }
  check_finite_rows("encoder.weight", weight);
}

void check_accumulation_steps(std::int32_t steps) {
  check_at_least("accumulation.steps", steps, 1);
  check_at_most("accumulation.steps", steps, CaseLimits::kMaxAccumulationSteps);
}

void check_accumulation_window(const Case& c) {
  if (!c.accumulation_window) return;
  check_at_least("accumulation.window", *c.accumulation_window, 1);
  check_at_most("accumulation.window", *c.accumulation_window, c.accumulation_steps);
}

// A micro-step outside the accumulation window never runs: it must hold nothing,
// so that no data in a case file is silently ignored.
void check_outside_window(const std::string& micro_path, bool empty) {
  if (!empty) fail(micro_path, "outside accumulation.window: must be empty on every DP shard");
}

void check_batches(const Case& c) {
  const auto micro_steps = static_cast<std::int64_t>(c.batches.size());
  if (micro_steps != c.accumulation_steps) {
    fail("batches", "expected " + number_text(std::int64_t{c.accumulation_steps}) +
                        " micro-steps (accumulation.steps), got " + number_text(micro_steps));
  }
  std::int64_t numbers = 0;
  for (std::int64_t m = 0; m < micro_steps; ++m) {
    const std::string micro_path = index_path("batches", m);
    const auto& shards = c.batches[static_cast<std::size_t>(m)];
    if (static_cast<std::int64_t>(shards.size()) != c.mesh.dp) {
      fail(micro_path, "expected " + number_text(std::int64_t{c.mesh.dp}) +
                           " DP shards (mesh.dp), got " +
                           number_text(static_cast<std::int64_t>(shards.size())));
    }
    if (m >= c.micro_steps_run()) {
      check_outside_window(micro_path,
                           std::all_of(shards.begin(), shards.end(), [](const auto& shard) {
                             return shard.negative_counts.empty() && shard.features.rows() == 0;
                           }));
      continue;
    }
    for (std::size_t d = 0; d < shards.size(); ++d) {
      const std::string shard_path = index_path(micro_path, static_cast<std::int64_t>(d));
      check_group_counts(shard_path, shards[d], c.loss);
      numbers += shards[d].features.size();
      if (numbers > CaseLimits::kMaxNumbers) {
        fail("batches", "more than " + number_text(CaseLimits::kMaxNumbers) +
                            " feature numbers in the case (the limit)");
      }
      check_shard_features(shard_path, shards[d], c.feature_dim());
    }
    check_micro_step_has_groups(micro_path, shards, c.loss);
    const double logits = micro_step_logits(shards, c.loss);
    if (logits > static_cast<double>(CaseLimits::kMaxLogits)) {
      const std::string count =
          logits < 9e18 ? number_text(static_cast<std::int64_t>(logits)) : real_text(logits);
      fail(micro_path, "the micro-step's loss has " + count + " logit entries, above the limit " +
                           number_text(CaseLimits::kMaxLogits));
    }
  }
}

void check_padding_draws(const Case& c) {
  if (!c.padding_draws) return;
  const loss::RecordedDraws& draws = *c.padding_draws;
  if (static_cast<std::int64_t>(draws.size()) != c.accumulation_steps) {
    fail("padding_draws", "expected " + number_text(std::int64_t{c.accumulation_steps}) +
                              " micro-steps (accumulation.steps), got " +
                              number_text(static_cast<std::int64_t>(draws.size())));
  }
  for (std::size_t m = 0; m < draws.size(); ++m) {
    const std::string micro_path = index_path("padding_draws", static_cast<std::int64_t>(m));
    if (static_cast<std::int64_t>(draws[m].size()) != c.mesh.dp) {
      fail(micro_path, "expected " + number_text(std::int64_t{c.mesh.dp}) +
                           " DP shards (mesh.dp), got " +
                           number_text(static_cast<std::int64_t>(draws[m].size())));
    }
    if (static_cast<std::int64_t>(m) >= c.micro_steps_run()) {
      check_outside_window(micro_path, std::all_of(draws[m].begin(), draws[m].end(),
                                                   [](const auto& s) { return s.empty(); }));
    }
    for (std::size_t d = 0; d < draws[m].size(); ++d) {
      const std::string stream_path = index_path(micro_path, static_cast<std::int64_t>(d));
      for (std::size_t i = 0; i < draws[m][d].size(); ++i) {
        check_at_least(index_path(stream_path, static_cast<std::int64_t>(i)), draws[m][d][i], 0);
      }
    }
  }
}

void check_expect(const Case& c) {
  if (!c.expect) return;
  const Expectation& expect = *c.expect;
  check_finite("expect.loss", expect.loss);
  if (expect.grad.rows() != c.weight.rows() || expect.grad.cols() != c.weight.cols()) {
    fail("expect.grad", "expected " + number_text(std::int64_t{c.weight.rows()}) + " x " +
                            number_text(std::int64_t{c.weight.cols()}) +
                            " numbers (the shape of encoder.weight), got " +
                            number_text(std::int64_t{expect.grad.rows()}) + " x " +
                            number_text(std::int64_t{expect.grad.cols()}));
  }
  check_finite_rows("expect.grad", expect.grad);
  check_finite("expect.rtol", expect.rtol);
  if (expect.rtol < 0) fail("expect.rtol", "must be >= 0, got " + real_text(expect.rtol));
  check_finite("expect.atol", expect.atol);
  if (expect.atol < 0) fail("expect.atol", "must be >= 0, got " + real_text(expect.atol));
}

void check_strategy(const Case& c) {
  if (!c.strategy) return;
  if (c.strategy->reduction != c.reduction) {
    fail("strategy.reduction", std::string("\"") +
                                   (c.strategy->reduction == Reduction::mean ? "mean" : "sum") +
                                   "\" disagrees with the case's reduction \"" +
                                   (c.reduction == Reduction::mean ? "mean" : "sum") + "\"");
  }
  if (!c.compensate) {
    fail("compensate", "must be true with a strategy key (strategy.scale sets the backward scale)");
  }
}

void check_expect_direct(const Case& c) {
  if (!c.expect || c.expect->direct.empty()) return;
  if (c.expect->direct.size() != direct_parameter_count(c)) {
    fail("expect.direct", "names " + std::to_string(c.expect->direct.size()) +
                              " parameters, the case has " +
                              std::to_string(direct_parameter_count(c)));
  }
  for (const double value : c.expect->direct) check_finite("expect.direct", value);
}

// A two-tower family's batches (casefile/tower_pair_batch.hpp) at `key`:
// one list of DP shards per micro-step, each shard's pairs split at
// `image_features` columns, within the limits; a micro-step's logits are
// `logit_matrices` squares of its pair count.
void check_tower_pair_batches(const Case& c, const std::string& key,
                              const std::vector<std::vector<TowerPairBatch>>& batches,
                              std::int64_t image_features, std::int64_t logit_matrices) {
  if (batches.size() != static_cast<std::size_t>(c.accumulation_steps)) {
    fail(key, "has " + number_text(static_cast<std::int64_t>(batches.size())) +
                  " micro-steps, accumulation.steps is " + number_text(c.accumulation_steps));
  }
  const std::int64_t text_features = c.feature_dim() - image_features;
  std::int64_t numbers = 0;
  for (std::size_t m = 0; m < batches.size(); ++m) {
    const std::string micro_path = index_path(key, static_cast<std::int64_t>(m));
    if (batches[m].size() != static_cast<std::size_t>(c.mesh.dp)) {
      fail(micro_path, "has " + number_text(static_cast<std::int64_t>(batches[m].size())) +
                           " DP shards, mesh.dp is " + number_text(c.mesh.dp));
    }
    std::int64_t rows = 0;
    for (std::size_t d = 0; d < batches[m].size(); ++d) {
      const std::string path = index_path(micro_path, static_cast<std::int64_t>(d));
      const TowerPairBatch& shard = batches[m][d];
      check_at_least(path + ".image", shard.image.rows(), 1);
      check_at_most(path + ".image", shard.image.rows(), CaseLimits::kMaxGroupsPerShard);
      if (shard.text.rows() != shard.image.rows()) {
        fail(path + ".text", "has " + number_text(shard.text.rows()) + " rows, .image has " +
                                 number_text(shard.image.rows()) + " (one pair per row)");
      }
      if (shard.image.cols() != image_features || shard.text.cols() != text_features) {
        fail(path, "rows of " + number_text(shard.image.cols()) + " and " +
                       number_text(shard.text.cols()) + " numbers, the towers take " +
                       number_text(image_features) + " and " + number_text(text_features));
      }
      check_finite_rows(path + ".image", shard.image);
      check_finite_rows(path + ".text", shard.text);
      numbers += shard.image.size() + shard.text.size();
      rows += shard.image.rows();
    }
    check_at_most(micro_path, logit_matrices * rows * rows, CaseLimits::kMaxLogits);
  }
  check_at_most(key, numbers, CaseLimits::kMaxNumbers);
}

// The CLIP family's invariants (casefile/clip_case.hpp), in place of the
// InfoNCE batches and settings a CLIP case does not have.
void check_clip(const Case& c) {
  const ClipSettings& clip = *c.clip;
  check_at_least("clip.image_tower.weight[0]", clip.image_features, 1);
  check_at_least("clip.text_tower.weight[0]", c.feature_dim() - clip.image_features, 1);
  check_finite("clip.log_logit_scale", clip.log_logit_scale);
  // exp(log scale) times a similarity must stay finite: CLIP clamps the scale at 100.
  if (clip.log_logit_scale > 50) {
    fail("clip.log_logit_scale",
         "must be <= 50 (exp(50) = 5e21), got " + real_text(clip.log_logit_scale));
  }
  if (clip.logit_bias) check_finite("clip.logit_bias", *clip.logit_bias);
  if (c.learnable_temperature) fail("learnable_temperature", "is an InfoNCE key, not CLIP's");
  if (c.accumulation_window) fail("accumulation.window", "is not supported for CLIP cases");
  if (c.padding_draws) fail("padding_draws", "is an InfoNCE key, not CLIP's");
  if (!c.batches.empty()) fail("batches", "is an InfoNCE key, not CLIP's (clip.batches)");
  if (!c.loss.use_batch) fail("clip", "the CLIP family always gathers (use_batch)");
  // CLIP's logits of one micro-step: (rows of the union)^2, twice.
  check_tower_pair_batches(c, "clip.batches", clip.batches, clip.image_features, 2);
}

// The NT-Xent family's invariants (casefile/ntxent_case.hpp).
void check_ntxent(const Case& c) {
  const NtXentSettings& ntxent = *c.ntxent;
  check_finite("ntxent.temperature", ntxent.temperature);
  if (!(ntxent.temperature > 0)) {
    fail("ntxent.temperature", "must be > 0, got " + real_text(ntxent.temperature));
  }
  if (c.accumulation_window) fail("accumulation.window", "is not supported for NT-Xent cases");
  if (c.padding_draws) fail("padding_draws", "is an InfoNCE key, not NT-Xent's");
  if (!c.batches.empty()) fail("batches", "is an InfoNCE key, not NT-Xent's (ntxent.batches)");
  if (ntxent.batches.size() != static_cast<std::size_t>(c.accumulation_steps)) {
    fail("ntxent.batches", "has " + number_text(static_cast<std::int64_t>(ntxent.batches.size())) +
                               " micro-steps, accumulation.steps is " +
                               number_text(c.accumulation_steps));
  }
  std::int64_t numbers = 0;
  for (std::size_t m = 0; m < ntxent.batches.size(); ++m) {
    const std::string micro_path = index_path("ntxent.batches", static_cast<std::int64_t>(m));
    if (ntxent.batches[m].size() != static_cast<std::size_t>(c.mesh.dp)) {
      fail(micro_path, "has " + number_text(static_cast<std::int64_t>(ntxent.batches[m].size())) +
                           " DP shards, mesh.dp is " + number_text(c.mesh.dp));
    }
    std::int64_t rows = 0;
    for (std::size_t d = 0; d < ntxent.batches[m].size(); ++d) {
      const std::string path = index_path(micro_path, static_cast<std::int64_t>(d));
      const NtXentShardBatch& shard = ntxent.batches[m][d];
      check_at_least(path + ".first", shard.first.rows(), 1);
      check_at_most(path + ".first", shard.first.rows(), CaseLimits::kMaxGroupsPerShard);
      if (shard.second.rows() != shard.first.rows()) {
        fail(path + ".second", "has " + number_text(shard.second.rows()) + " rows, .first has " +
                                   number_text(shard.first.rows()) + " (one sample per row)");
      }
      if (shard.first.cols() != c.feature_dim() || shard.second.cols() != c.feature_dim()) {
        fail(path, "rows of " + number_text(shard.first.cols()) + " and " +
                       number_text(shard.second.cols()) + " numbers, the encoder takes " +
                       number_text(c.feature_dim()));
      }
      check_finite_rows(path + ".first", shard.first);
      check_finite_rows(path + ".second", shard.second);
      numbers += shard.first.size() + shard.second.size();
      rows += 2 * shard.first.rows();
    }
    check_at_most(micro_path, rows * rows, CaseLimits::kMaxLogits);  // the 2N x 2N logits
  }
  check_at_most("ntxent.batches", numbers, CaseLimits::kMaxNumbers);
}

// The SigLIP family's invariants (casefile/siglip_case.hpp).
void check_siglip(const Case& c) {
  const SigLipSettings& siglip = *c.siglip;
  check_at_least("siglip.image_features", siglip.image_features, 1);
  if (siglip.image_features >= c.feature_dim()) {
    fail("siglip.image_features", "must leave the text tower at least one of encoder.weight's " +
                                      number_text(c.feature_dim()) + " columns, got " +
                                      number_text(siglip.image_features));
  }
  check_finite("siglip.log_scale", siglip.log_scale);
  // exp(log scale) times a similarity must stay finite (SigLIP clamps the scale at 100).
  if (siglip.log_scale > 50) {
    fail("siglip.log_scale", "must be <= 50 (exp(50) = 5e21), got " + real_text(siglip.log_scale));
  }
  check_finite("siglip.bias", siglip.bias);
  if (c.learnable_temperature) fail("learnable_temperature", "is an InfoNCE key, not SigLIP's");
  if (c.accumulation_window) fail("accumulation.window", "is not supported for SigLIP cases");
  if (c.padding_draws) fail("padding_draws", "is an InfoNCE key, not SigLIP's");
  if (!c.batches.empty()) fail("batches", "is an InfoNCE key, not SigLIP's (siglip.batches)");
  // SigLIP's logits of one micro-step: the N x N of the union's rows.
  check_tower_pair_batches(c, "siglip.batches", siglip.batches, siglip.image_features, 1);
}

}  // namespace case_checks

std::vector<std::string> direct_parameter_names(const Case& c) {
  if (c.clip) {
    std::vector<std::string> names{"log_logit_scale"};
    if (c.clip->logit_bias) names.emplace_back("logit_bias");
    return names;
  }
  if (c.siglip) return {"log_scale", "bias"};
  if (c.learnable_temperature) return {"inverse_temperature"};
  return {};
}

Strategy effective_strategy(const Case& c) {
  if (c.strategy) return *c.strategy;
  Strategy trainer;
  trainer.gather = GatherKind::detached_own_live;
  trainer.scope = LossScope::global;
  trainer.reduction = c.reduction;
  // A CLIP case always gathers (its loss.use_batch stays true).
  const bool fix_applies = c.compensate && c.loss.use_batch && c.reduction == Reduction::mean;
  trainer.scale = fix_applies ? BackwardScale::dp_shards : BackwardScale::none;
  return trainer;
}

void validate_case(const Case& c) {
  if (c.siglip) {
    if (c.clip || c.ntxent)
      case_checks::fail("siglip", "a case has one family: \"siglip\" and another are both set");
    case_checks::check_mesh(c.mesh);
    case_checks::check_weight(c.weight);
    case_checks::check_accumulation_steps(c.accumulation_steps);
    case_checks::check_siglip(c);
    case_checks::check_expect(c);
    case_checks::check_strategy(c);
    case_checks::check_expect_direct(c);
    return;
  }
  if (c.ntxent) {
    if (c.clip)
      case_checks::fail("ntxent", "a case has one family: \"clip\" and \"ntxent\" are both set");
    case_checks::check_mesh(c.mesh);
    case_checks::check_weight(c.weight);
    case_checks::check_accumulation_steps(c.accumulation_steps);
    case_checks::check_ntxent(c);
    case_checks::check_expect(c);
    case_checks::check_strategy(c);
    case_checks::check_expect_direct(c);
    return;
  }
  if (c.clip) {
    case_checks::check_mesh(c.mesh);
    case_checks::check_weight(c.weight);
    case_checks::check_accumulation_steps(c.accumulation_steps);
    case_checks::check_accumulation_window(c);
    case_checks::check_clip(c);
    case_checks::check_expect(c);
    case_checks::check_strategy(c);
    case_checks::check_expect_direct(c);
    return;
  }
  case_checks::check_mesh(c.mesh);
  case_checks::check_loss_settings(c.loss);
  case_checks::check_weight(c.weight);
  case_checks::check_accumulation_steps(c.accumulation_steps);
  case_checks::check_accumulation_window(c);
  case_checks::check_padding_draws(c);
  case_checks::check_batches(c);
  case_checks::check_expect(c);
  case_checks::check_strategy(c);
  case_checks::check_expect_direct(c);
}

loss::ReferenceProblem reference_problem(const Case& c) {
  loss::ReferenceProblem problem;
  problem.settings = c.loss;
  problem.weight = c.weight;
  problem.normalize = c.encoder_normalize;
  problem.accumulation_normalize = c.accumulation_normalize;
  problem.learnable_temperature = c.learnable_temperature;
  // Without use_batch the objective is per shard; a summing reduction adds
  // the shards' means instead of averaging them (DESIGN.md).
  problem.sum_over_shards = c.reduction == Reduction::sum && !c.loss.use_batch;
  // Only the micro-steps that ran (SPEC section 12): the reference divides by their count.
  problem.micro_batches.assign(c.batches.begin(), c.batches.begin() + c.micro_steps_run());
  return problem;
}

std::unique_ptr<loss::PaddingPlan> reference_padding(const Case& c) {
  if (c.padding_draws) {
    if (!c.loss.use_batch) return std::make_unique<loss::RecordedPadding>(*c.padding_draws);
    // With use_batch the reference pads the union once, with stream 0: the
    // draws of DP shard 0. The other shards' draws feed only the distributed
    // run, so they are left out here rather than reported as unused.
    loss::RecordedDraws stream_zero;
    for (const auto& micro : *c.padding_draws) stream_zero.push_back({micro.at(0)});
    return std::make_unique<loss::RecordedPadding>(stream_zero);
  }
  // Stream d is the generator of DP shard d's first replica (world rank d * R).
  std::vector<std::uint64_t> seeds;
  for (std::int32_t d = 0; d < c.mesh.dp; ++d) {
    seeds.push_back(padding_seed_of_rank(c, d * c.mesh.replicas()));
  }
  return std::make_unique<loss::GeneratedPadding>(std::move(seeds));
}

std::uint64_t padding_seed_of_rank(const Case& c, std::int32_t world_rank) {
  INFONCE_ASSERT(world_rank >= 0 && world_rank < c.mesh.world);
  switch (c.rng_mode) {
    case RngMode::synced:
      return c.rng_seed;
    case RngMode::per_rank:
      // The usual `np.random.seed(seed + rank)`: rank 0 keeps the synced
      // stream, every other rank draws its own.
      return c.rng_seed + static_cast<std::uint64_t>(world_rank);
  }
  INFONCE_ASSERT(false);
  return 0;
}

}  // namespace infonce
