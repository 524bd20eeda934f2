// The oracle's pieces on cases small enough to work out by hand: every
// expected value below is written from the SPEC with pencil and paper.
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "base/error.hpp"
#include "oracle/encoder.hpp"
#include "oracle/encoder_backward.hpp"
#include "oracle/groups.hpp"
#include "oracle/logit_rows.hpp"
#include "oracle/objective.hpp"
#include "oracle/padding.hpp"

namespace infonce::oracle {
namespace {

using Rows1 = std::vector<std::int32_t>;

TEST(OracleGroups, TheIthOneShiftedByIIsGroupIsQuery) {
  // q p n n | q p | q p n
  const std::vector<Group> groups = parse_groups({1, 0, 0, 1, 1, 0}, 9);
  ASSERT_EQ(groups.size(), 3u);
  EXPECT_EQ(groups[0].query, 0);
  EXPECT_EQ(groups[0].positive, 1);
  EXPECT_EQ(groups[0].negatives, (Rows1{2, 3}));
  EXPECT_EQ(groups[1].query, 4);
  EXPECT_EQ(groups[1].positive, 5);
  EXPECT_EQ(groups[1].negatives, Rows1{});
  EXPECT_EQ(groups[2].query, 6);
  EXPECT_EQ(groups[2].negatives, Rows1{8});
  EXPECT_TRUE(parse_groups({}, 0).empty());
}

TEST(OracleGroups, LabelsThatCannotDescribeTheSentencesAreRejected) {
  EXPECT_THROW(parse_groups({1, 0}, 4), InputError);  // 3 sentences
  EXPECT_THROW(parse_groups({0, 1}, 4), InputError);  // starts with a negative
  EXPECT_THROW(parse_groups({1, 2}, 4), InputError);  // not 0/1
}

TEST(OracleHardNegatives, LegacyTakesRowJPlus1AndFixedRowJPlus2) {
  const Draws draws{0, 1};
  for (const PaddingRow row : {PaddingRow::legacy, PaddingRow::fixed}) {
    std::vector<Group> groups = parse_groups({1, 0, 0}, 4);  // q0 p1 n2 n3
    DrawStream stream(draws);
    resize_hard_negatives(groups, 4, row, stream);
    // legacy: j=0 -> row 1 of [q, p, n..] = the positive, j=1 -> n_1;
    // fixed:  j=0 -> n_1 (sentence 2), j=1 -> n_2 (sentence 3).
    EXPECT_EQ(groups[0].negatives,
              row == PaddingRow::legacy ? (Rows1{2, 3, 1, 2}) : (Rows1{2, 3, 2, 3}));
    EXPECT_EQ(stream.left(), 0u);
  }
}

TEST(OracleHardNegatives, KeepsTheFirstHAndRejectsWhatTheTrainerRejects) {
  std::vector<Group> groups = parse_groups({1, 0, 0, 0}, 5);
  const Draws none;
  DrawStream empty(none);
  resize_hard_negatives(groups, 2, PaddingRow::fixed, empty);
  EXPECT_EQ(groups[0].negatives, (Rows1{2, 3}));

  std::vector<Group> bare = parse_groups({1}, 2);
  EXPECT_THROW(resize_hard_negatives(bare, 1, PaddingRow::fixed, empty), InputError);
  std::vector<Group> short_group = parse_groups({1, 0}, 3);
  EXPECT_THROW(resize_hard_negatives(short_group, 2, PaddingRow::fixed, empty), InputError);
  const Draws out_of_range{1};  // k = 1: only j = 0 exists
  DrawStream bad(out_of_range);
  EXPECT_THROW(resize_hard_negatives(short_group, 2, PaddingRow::fixed, bad), InputError);
}

TEST(OracleLogitRows, BlocksQdQqDdWithTheirSelfEntriesLeftOut) {
  LossSettings s;
  s.include_qq = s.include_dd = true;
  // q0 p1 n2 | q3 p4: docs = [1, 2, 4], t = [0, 2].
  const std::vector<LogitRow> rows = batch_rows(parse_groups({1, 0, 1}, 5), s);
  ASSERT_EQ(rows.size(), 2u);
  auto pairs = [](const LogitRow& row) {
    std::vector<std::pair<std::int32_t, std::int32_t>> out;
    for (const Entry& e : row.entries) out.emplace_back(e.left, e.right);
    return out;
  };
  using P = std::vector<std::pair<std::int32_t, std::int32_t>>;
  EXPECT_EQ(pairs(rows[0]), (P{{0, 1}, {0, 2}, {0, 4}, {0, 3}, {1, 2}, {1, 4}}));
  EXPECT_EQ(rows[0].target, 0);
  EXPECT_EQ(pairs(rows[1]), (P{{3, 1}, {3, 2}, {3, 4}, {3, 0}, {4, 1}, {4, 2}}));
  EXPECT_EQ(rows[1].target, 2);
  EXPECT_EQ(rows[1].entries[3].block, Block::qq);
  EXPECT_EQ(rows[1].entries[4].block, Block::dd);
}

// One sentence feature per row, W = [w] (D = F = 1), no normalisation.
Description one_dimensional(std::vector<Real> features, std::vector<std::int32_t> labels, Real w) {
  Description d;
  d.normalize = false;
  d.weight = RealRows::Constant(1, 1, w);
  ShardInput shard;
  shard.sentences =
      Eigen::Map<RealRows>(features.data(), static_cast<Eigen::Index>(features.size()), 1);
  shard.labels = std::move(labels);
  d.micro_steps = {{shard}};
  return d;
}

TEST(OracleLoss, OneGroupWithoutBatchIsTheTwoLogitCrossEntropy) {
  // q = 1, p = 2, n = 0, T = 1: L(w) = log(exp(2 w^2) + 1) - 2 w^2,
  // dL/dw = 4 w (sigmoid(2 w^2) - 1) = -4 / (1 + e^2) at w = 1.
  Description d = one_dimensional({1, 2, 0}, {1, 0}, 1);
  d.loss.use_batch = false;
  d.loss.temperature = 1;
  const Result r = evaluate(d);
  EXPECT_NEAR(static_cast<double>(r.loss), std::log1p(std::exp(-2.0)), 1e-15);
  EXPECT_NEAR(static_cast<double>(r.grad(0, 0)), -4 / (1 + std::exp(2.0)), 1e-15);
}

TEST(OracleLoss, TheMaskKeepsAnExactTieAndDropsWhatIsStrictlyAbove) {
  // use_batch, one group q p n with sims q.p = 1, q.n = n; margin 0.5, T = 1: h = 1.5.
  for (const Real n : {1.5L, 1.75L}) {
    Description d = one_dimensional({1, 1, n}, {1, 0}, 1);
    d.loss.temperature = 1;
    d.loss.mask_fake_negative = true;
    d.loss.fake_neg_margin = 0.5L;
    const Result r = evaluate(d);
    // tie: log(e^1 + e^1.5) - 1; above: only the target is left, loss 0.
    const double expected = n == 1.5L ? std::log(std::exp(1.0) + std::exp(1.5)) - 1 : 0.0;
    EXPECT_NEAR(static_cast<double>(r.loss), expected, 1e-15) << static_cast<double>(n);
  }
}

TEST(OracleLoss, ANegativeMarginMasksTheTargetAndTheLossIsInfinite) {
  Description d = one_dimensional({1, 1, 0}, {1, 0}, 1);
  d.loss.mask_fake_negative = true;
  d.loss.fake_neg_margin = -0.1L;
  EXPECT_TRUE(std::isinf(evaluate(d).loss));
}

TEST(OracleLoss, TemperatureDividesTheSimilaritiesOnce) {
  // use_batch, one group q p n, sims 1 and 0, T = 0.5: logits 2 and 0.
  Description d = one_dimensional({1, 1, 0}, {1, 0}, 1);
  d.loss.temperature = 0.5L;
  EXPECT_NEAR(static_cast<double>(evaluate(d).loss), std::log1p(std::exp(-2.0)), 1e-15);
}

// Learnable inverse temperature tau = 1 / T, one group q p n in 1-D (W = 1, no
// normalisation): q = 1, p = 2, n = 0 give similarities 2 and 0, logits 2 tau
// and 0. L(tau) = log(e^{2 tau} + 1) - 2 tau = log(1 + e^{-2 tau}), so
// dL/dtau = -2 e^{-2 tau} / (1 + e^{-2 tau}) = -2 / (1 + e^{2 tau}).
// Its terms: p's (softmax_p - 1) 2 = -2 / (1 + e^{2 tau}), n's softmax_n 0 = 0;
// their bound (softmax_p + 1) 2 = 2 (2 e^{2 tau} + 1) / (1 + e^{2 tau}).
TEST(OracleLearnableTemperature, OneGroupInOneDimensionByHand) {
  for (const bool use_batch : {false, true}) {  // one group: the same single row
    Description d = one_dimensional({1, 2, 0}, {1, 0}, 1);
    d.loss.use_batch = use_batch;
    d.loss.temperature = 0.5L;  // tau = 2
    d.learnable_temperature = true;
    const Result r = evaluate(d);
    const double e4 = std::exp(4.0);
    EXPECT_NEAR(static_cast<double>(r.loss), std::log1p(1 / e4), 1e-15);
    EXPECT_NEAR(static_cast<double>(r.grad_inverse_temperature), -2 / (1 + e4), 1e-15);
    EXPECT_NEAR(static_cast<double>(r.grad_inverse_temperature_magnitude), 2 / (1 + e4), 1e-15);
    EXPECT_NEAR(static_cast<double>(r.grad_inverse_temperature_bound), 2 * (2 * e4 + 1) / (1 + e4),
                1e-15);
  }
}

// The mask drops an entry by its raw similarity and the threshold carries no
// gradient: q = 1, p = 1, n_1 = 2, n_2 = 0, margin 0.5 give similarities
// 1, 2, 0 and h = 1.5, so n_1 is masked and L(tau) = log(e^tau + 1) - tau,
// dL/dtau = -1 / (1 + e^tau), at every tau (the mask does not move with it).
TEST(OracleLearnableTemperature, TheMaskedEntryAddsNothing) {
  for (const Real temperature : {1.0L, 0.25L}) {
    Description d = one_dimensional({1, 1, 2, 0}, {1, 0, 0}, 1);
    d.loss.temperature = temperature;
    d.loss.mask_fake_negative = true;
    d.loss.fake_neg_margin = 0.5L;
    d.learnable_temperature = true;
    const double tau = static_cast<double>(1 / temperature);
    const Result r = evaluate(d);
    EXPECT_NEAR(static_cast<double>(r.loss), std::log1p(std::exp(-tau)), 1e-15);
    EXPECT_NEAR(static_cast<double>(r.grad_inverse_temperature), -1 / (1 + std::exp(tau)), 1e-15);
  }
}

// Through the objective's structure: GA's 1/A, and without use_batch the mean
// (or, summing, the sum) of the shards' losses. A group without negatives has
// one logit, softmax 1, and no gradient.
TEST(OracleLearnableTemperature, FollowsAccumulationAndTheShardMean) {
  const double one = -2 / (1 + std::exp(2.0));  // tau = 1, as in the case above
  Description d = one_dimensional({1, 2, 0}, {1, 0}, 1);
  d.loss.temperature = 1;
  d.learnable_temperature = true;
  d.micro_steps.push_back(d.micro_steps[0]);
  EXPECT_NEAR(static_cast<double>(evaluate(d).grad_inverse_temperature), one, 1e-15);
  d.accumulation_normalize = false;
  EXPECT_NEAR(static_cast<double>(evaluate(d).grad_inverse_temperature), 2 * one, 1e-15);

  Description shards = one_dimensional({1, 2, 0}, {1, 0}, 1);
  shards.loss.use_batch = false;
  shards.loss.temperature = 1;
  shards.learnable_temperature = true;
  ShardInput second;
  second.sentences = RealRows::Constant(2, 1, 1);
  second.labels = {1};
  shards.micro_steps[0].push_back(second);
  EXPECT_NEAR(static_cast<double>(evaluate(shards).grad_inverse_temperature), one / 2, 1e-15);
  shards.sum_over_shards = true;
  EXPECT_NEAR(static_cast<double>(evaluate(shards).grad_inverse_temperature), one, 1e-15);
}

TEST(OracleLearnableTemperature, NeedsAFinitePositiveTau) {
  Description d = one_dimensional({1, 2, 0}, {1, 0}, 1);
  d.learnable_temperature = true;
  for (const Real temperature : {0.0L, -1.0L, std::numeric_limits<Real>::infinity()}) {
    d.loss.temperature = temperature;
    EXPECT_THROW(evaluate(d), InputError) << static_cast<double>(temperature);
  }
}

TEST(OracleEncoder, NormalisesAndDifferentiatesTheUnitVector) {
  const RealRows identity = RealRows::Identity(2, 2);
  RealRows x(1, 2);
  x << 3, 4;
  const RealRows e = encode<Real>(identity, x, true);
  EXPECT_NEAR(static_cast<double>(e(0, 0)), 0.6, 1e-18);
  EXPECT_NEAR(static_cast<double>(e(0, 1)), 0.8, 1e-18);
  // dL/dy = (1, 0): dL/de = ((1, 0) - y * 0.6) / 5 = (0.128, -0.096); dL/dW = that x^T.
  RealRows g(1, 2);
  g << 1, 0;
  RealRows grad = RealRows::Zero(2, 2), magnitude = RealRows::Zero(2, 2);
  add_encoder_backward(identity, x, true, g, 1, grad, magnitude);
  EXPECT_NEAR(static_cast<double>(grad(0, 0)), 0.384, 1e-17);
  EXPECT_NEAR(static_cast<double>(grad(0, 1)), 0.512, 1e-17);
  EXPECT_NEAR(static_cast<double>(grad(1, 0)), -0.288, 1e-17);
  EXPECT_NEAR(static_cast<double>(grad(1, 1)), -0.384, 1e-17);
  EXPECT_NEAR(static_cast<double>(magnitude(1, 0)), 0.288, 1e-17);
}

TEST(OracleEncoder, AZeroRowTakesTheEpsBranch) {
  const RealRows identity = RealRows::Identity(2, 2);
  const RealRows x = RealRows::Zero(1, 2);
  EXPECT_EQ(encode<Real>(identity, x, true), x);  // 0 / eps
  RealRows x1(1, 2);
  x1 << 1e-13L, 0;  // below eps: e / eps, linear
  EXPECT_NEAR(static_cast<double>(encode<Real>(identity, x1, true)(0, 0)), 0.1, 1e-15);
}

TEST(OracleEncoder, EncodingConditionIsTheCancellationOfTheWorstRow) {
  RealRows w(2, 2);
  w << 1, 1, 0, 1;
  RealRows x(3, 2);
  x << 1, 0,     // W x = (1, 0), |W| |x| = (1, 0): 1
      1, -0.75,  // W x = (0.25, -0.75), |W| |x| = (1.75, 0.75)
      0, 0;      // nothing to round: 1
  // sqrt(1.75^2 + 0.75^2) / sqrt(0.25^2 + 0.75^2) = sqrt(3.625 / 0.625) = sqrt(5.8)
  EXPECT_NEAR(static_cast<double>(encoding_condition(w, x)), std::sqrt(5.8), 1e-15);
  RealRows cancels(1, 2);
  cancels << 1, -1;  // W x = (0, -1): only the first coordinate cancels
  EXPECT_NEAR(static_cast<double>(encoding_condition(w, cancels)), std::sqrt(5.0), 1e-15);
  RealRows w1(1, 2);
  w1 << 1, 1;
  EXPECT_TRUE(std::isinf(encoding_condition(w1, cancels)));  // exactly zero from 1 - 1
}

TEST(OracleObjective, AccumulationDividesByAOnlyWhenNormalised) {
  Description d = one_dimensional({1, 2, 0}, {1, 0}, 1);
  d.loss.temperature = 1;
  const Real one = evaluate(d).loss;
  d.micro_steps.push_back(d.micro_steps[0]);
  EXPECT_NEAR(static_cast<double>(evaluate(d).loss), static_cast<double>(one), 1e-18);
  d.accumulation_normalize = false;
  EXPECT_NEAR(static_cast<double>(evaluate(d).loss), 2 * static_cast<double>(one), 1e-18);
}

TEST(OracleObjective, WithoutBatchTheObjectiveIsTheMeanOfShardMeans) {
  // shard 0: one group, loss a = log1p(e^-2); shard 1: a group without negatives, loss 0.
  Description d = one_dimensional({1, 2, 0}, {1, 0}, 1);
  d.loss.use_batch = false;
  d.loss.temperature = 1;
  ShardInput second;
  second.sentences = RealRows::Constant(2, 1, 1);
  second.labels = {1};
  d.micro_steps[0].push_back(second);
  const double a = std::log1p(std::exp(-2.0));
  Result r = evaluate(d);
  EXPECT_NEAR(static_cast<double>(r.loss), a / 2, 1e-15);
  EXPECT_NEAR(static_cast<double>(r.shard_losses[0]), a, 1e-15);
  EXPECT_EQ(r.shard_losses[1], 0);
  d.sum_over_shards = true;
  EXPECT_NEAR(static_cast<double>(evaluate(d).loss), a, 1e-15);
}

TEST(OracleObjective, LeftOverOrMissingDrawsAndEmptyBatchesAreErrors) {
  Description d = one_dimensional({1, 2, 0}, {1, 0}, 1);
  d.draws = {{{0}}};  // nothing is padded: a draw is left over
  EXPECT_THROW(evaluate(d), InputError);
  d.loss.hard_negatives = 2;  // now the one draw is needed...
  EXPECT_NO_THROW(evaluate(d));
  d.loss.hard_negatives = 3;  // ...and two are missing one
  EXPECT_THROW(evaluate(d), InputError);
  Description empty = one_dimensional({}, {}, 1);
  EXPECT_THROW(evaluate(empty), InputError);
}

}  // namespace
}  // namespace infonce::oracle
