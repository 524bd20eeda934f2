// The oracle's CLIP loss on cases small enough to work out by hand (every
// expected value is written from the definition with pencil and paper), the
// bias's softmax invariance, and the input it rejects.
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "base/error.hpp"
#include "oracle/clip_objective.hpp"
#include "tests/oracle/random_clip_description.hpp"

namespace infonce::oracle {
namespace {

double softplus(double x) {
  return std::log1p(std::exp(x));
}
double sigmoid(double x) {
  return 1 / (1 + std::exp(-x));
}

RealRows column(std::vector<Real> values) {
  return Eigen::Map<RealRows>(values.data(), static_cast<Eigen::Index>(values.size()), 1);
}

// N = 2 pairs, D = F = 1, both weights 1, no normalisation, log_scale 0
// (scale 1): image embeddings a = (1, 2), text embeddings b = (1, -1).
ClipDescription two_pairs(std::optional<Real> bias) {
  ClipDescription d;
  d.image_weight = RealRows::Constant(1, 1, 1);
  d.text_weight = RealRows::Constant(1, 1, 1);
  d.image_normalize = d.text_normalize = false;
  d.bias = bias;
  d.micro_steps = {{{column({1, 2}), column({1, -1})}}};
  return d;
}

// Logits a_i b_j + bias. Image to text: row 1 [1, -1], target 0, CE softplus(-2);
// row 2 [2, -2], target 1, CE softplus(4). Text to image: row 1 [1, 2],
// target 0, CE softplus(1); row 2 [-1, -2], target 1, CE softplus(1). The bias
// cancels from every CE. L = (softplus(-2) + softplus(4)) / 4 + 2 softplus(1) / 4.
//
// Every logit is k A (+ bias) with A = exp(log_scale) w_image w_text, so
// dL/dA = (-2 sigmoid(-2) + 4 sigmoid(4) + 2 sigmoid(1)) / 4, and at A = 1
// dL/dlog_scale = A dL/dA, dL/dw_image = dL/dw_text = dL/dA: all equal.
// The bias's terms: (softmax - onehot) / 4 per entry, each row's summing to 0;
// their |.| per row is 2 (1 - p_target) / 4 with 1 - p_target = sigmoid(-2),
// sigmoid(4), sigmoid(1), sigmoid(1); their bound (softmax + onehot) / 4 adds
// up to 2 / 4 per row, 2 over the four rows.
TEST(OracleClipLoss, TwoPairsInOneDimensionByHand) {
  const double loss = (softplus(-2) + softplus(4)) / 4 + 2 * softplus(1) / 4;
  const double d_scale = (-2 * sigmoid(-2) + 4 * sigmoid(4) + 2 * sigmoid(1)) / 4;
  for (const std::optional<Real> bias : {std::optional<Real>(), std::optional<Real>(0.5L)}) {
    const ClipResult r = evaluate_clip(two_pairs(bias));
    EXPECT_NEAR(static_cast<double>(r.loss), loss, 1e-15);
    EXPECT_NEAR(static_cast<double>(r.grad_log_scale), d_scale, 1e-15);
    EXPECT_NEAR(static_cast<double>(r.grad_image_weight(0, 0)), d_scale, 1e-15);
    EXPECT_NEAR(static_cast<double>(r.grad_text_weight(0, 0)), d_scale, 1e-15);
    EXPECT_NEAR(static_cast<double>(r.grad_bias), 0, 1e-18);
    EXPECT_NEAR(static_cast<double>(r.max_abs_logit), bias ? 2.5 : 2.0, 1e-18);
    if (!bias) {
      EXPECT_EQ(r.grad_bias_magnitude, 0);
      continue;
    }
    EXPECT_NEAR(static_cast<double>(r.grad_bias_magnitude),
                (sigmoid(-2) + sigmoid(4) + 2 * sigmoid(1)) / 2, 1e-15);
    EXPECT_NEAR(static_cast<double>(r.grad_bias_bound), 2, 1e-15);
  }
}

// log_scale = log 2 and w_image = 0.5 keep A = 1: the same logits and loss,
// dL/dw_image = 2 w_text dL/dA = 2 dL/dA, dL/dw_text = 0.5 * 2 dL/dA = dL/dA,
// dL/dlog_scale = A dL/dA = dL/dA.
TEST(OracleClipLoss, TheScaleIsExpOfLogScale) {
  const double d_scale = (-2 * sigmoid(-2) + 4 * sigmoid(4) + 2 * sigmoid(1)) / 4;
  ClipDescription d = two_pairs(std::nullopt);
  d.log_scale = std::log(2.0L);
  d.image_weight(0, 0) = 0.5L;
  const ClipResult r = evaluate_clip(d);
  EXPECT_NEAR(static_cast<double>(r.loss), (softplus(-2) + softplus(4) + 2 * softplus(1)) / 4,
              1e-15);
  EXPECT_NEAR(static_cast<double>(r.grad_image_weight(0, 0)), 2 * d_scale, 1e-15);
  EXPECT_NEAR(static_cast<double>(r.grad_text_weight(0, 0)), d_scale, 1e-15);
  EXPECT_NEAR(static_cast<double>(r.grad_log_scale), d_scale, 1e-15);
}

// Normalised 2-D towers: image features (3, 4) and (0, 1) with W = I encode to
// (0.6, 0.8) and (0, 1); text (1, 0) and (0, 2) to (1, 0) and (0, 1).
// Similarities: a_1 . b = (0.6, 0.8), a_2 . b = (0, 1); b_1 . a = (0.6, 0),
// b_2 . a = (0.8, 1). CEs: softplus(0.2), softplus(-1), softplus(-0.6),
// softplus(-0.2); L is their sum over 4.
TEST(OracleClipLoss, NormalisedTowersByHand) {
  ClipDescription d;
  d.image_weight = RealRows::Identity(2, 2);
  d.text_weight = RealRows::Identity(2, 2);
  RealRows image(2, 2), text(2, 2);
  image << 3, 4, 0, 1;
  text << 1, 0, 0, 2;
  d.micro_steps = {{{image, text}}};
  const double loss = (softplus(0.2) + softplus(-1) + softplus(-0.6) + softplus(-0.2)) / 4;
  EXPECT_NEAR(static_cast<double>(evaluate_clip(d).loss), loss, 1e-15);
}

// The batch is the union of the shards' pairs in shard order, and GA divides
// each micro-step's loss by A only when normalising.
TEST(OracleClipObjective, ShardsAreUnitedAndAccumulationDividesByA) {
  const ClipResult one = evaluate_clip(two_pairs(0.5L));
  ClipDescription split = two_pairs(0.5L);
  split.micro_steps = {{{column({1}), column({1})}, {column({2}), column({-1})}}};
  const ClipResult shards = evaluate_clip(split);
  EXPECT_NEAR(static_cast<double>(shards.loss), static_cast<double>(one.loss), 1e-18);
  EXPECT_NEAR(static_cast<double>(shards.grad_log_scale), static_cast<double>(one.grad_log_scale),
              1e-18);

  ClipDescription twice = two_pairs(0.5L);
  twice.micro_steps.push_back(twice.micro_steps[0]);
  EXPECT_NEAR(static_cast<double>(evaluate_clip(twice).loss), static_cast<double>(one.loss), 1e-18);
  twice.accumulation_normalize = false;
  const ClipResult summed = evaluate_clip(twice);
  EXPECT_NEAR(static_cast<double>(summed.loss), 2 * static_cast<double>(one.loss), 1e-17);
  EXPECT_NEAR(static_cast<double>(summed.grad_text_weight(0, 0)),
              2 * static_cast<double>(one.grad_text_weight(0, 0)), 1e-17);
}

// A single pair: its own row is the only logit, the loss 0 at any scale.
TEST(OracleClipObjective, OnePairHasNothingToContrast) {
  ClipDescription d = two_pairs(1.0L);
  d.micro_steps = {{{column({3}), column({-2})}}};
  const ClipResult r = evaluate_clip(d);
  EXPECT_EQ(r.loss, 0);
  EXPECT_EQ(r.grad_log_scale, 0);
  EXPECT_EQ(r.grad_image_weight(0, 0), 0);
}

// Softmax invariance: the bias moves every logit of a row alike, so the loss,
// the other gradients and dL/dbias (= 0) do not depend on it, up to rounding
// the logits (u (1 + max|z|), u = 2^-64).
TEST(OracleClipBias, TheLossDoesNotDependOnTheBias) {
  Real worst_bias = 0, worst_loss = 0;
  for (std::uint64_t seed = 1; seed <= 200; ++seed) {
    SCOPED_TRACE(seed);
    ClipDescription d = testing::random_clip_description(seed);
    d.bias.reset();
    const ClipResult without = evaluate_clip(d);
    for (const Real bias : {-10.0L, 0.0L, 3.5L}) {
      d.bias = bias;
      const ClipResult with = evaluate_clip(d);
      const Real rounding = 1 + with.max_abs_logit;
      const Real bias_error = std::abs(with.grad_bias) / with.grad_bias_bound;
      const Real loss_error = std::abs(with.loss - without.loss) / rounding;
      EXPECT_LE(bias_error, 1e-17L);
      EXPECT_LE(loss_error, 1e-17L);
      EXPECT_NEAR(static_cast<double>(with.grad_log_scale),
                  static_cast<double>(without.grad_log_scale),
                  1e-17 * static_cast<double>(rounding * with.grad_log_scale_bound));
      worst_bias = std::max(worst_bias, bias_error);
      worst_loss = std::max(worst_loss, loss_error);
    }
  }
  std::printf(
      "clip bias, 200 cases x 3 biases: worst |dL/dbias| %.3Le of its bound, "
      "worst loss change %.3Le of 1 + max|z|\n",
      worst_bias, worst_loss);
}

TEST(OracleClipInput, UndefinedCasesAreRejected) {
  const ClipDescription good = two_pairs(0.5L);
  EXPECT_NO_THROW(evaluate_clip(good));
  const Real inf = std::numeric_limits<Real>::infinity();
  const Real nan = std::numeric_limits<Real>::quiet_NaN();
  auto rejected = [&](auto&& change) {
    ClipDescription d = good;
    change(d);
    EXPECT_THROW(evaluate_clip(d), InputError);
  };
  rejected([](ClipDescription& d) { d.micro_steps.clear(); });
  rejected([](ClipDescription& d) { d.micro_steps[0].clear(); });
  rejected([](ClipDescription& d) {
    d.micro_steps[0].push_back({RealRows(0, 1), RealRows(0, 1)});
  });
  rejected([](ClipDescription& d) { d.micro_steps[0][0].text = column({1}); });  // 2 vs 1 rows
  rejected([](ClipDescription& d) { d.micro_steps[0][0].image = RealRows::Ones(2, 2); });  // F
  rejected([](ClipDescription& d) { d.text_weight = RealRows::Ones(2, 1); });  // D 1 vs 2
  rejected([](ClipDescription& d) { d.image_weight = RealRows(0, 1); });
  rejected([&](ClipDescription& d) { d.micro_steps[0][0].image(1, 0) = nan; });
  rejected([&](ClipDescription& d) { d.micro_steps[0][0].text(0, 0) = inf; });
  rejected([&](ClipDescription& d) { d.image_weight(0, 0) = nan; });
  rejected([&](ClipDescription& d) { d.text_weight(0, 0) = -inf; });
  rejected([&](ClipDescription& d) { d.log_scale = nan; });
  rejected([](ClipDescription& d) { d.log_scale = 20000; });  // exp overflows long double
  rejected([&](ClipDescription& d) { d.bias = inf; });
}

}  // namespace
}  // namespace infonce::oracle
