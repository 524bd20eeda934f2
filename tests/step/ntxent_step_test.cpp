// The NT-Xent family through the data-parallel step (SPEC section 14): the
// case file's "family": "ntxent", the full-batch reference, and the rank
// program at every strategy point against step/strategy.hpp's prediction for
// both parameter groups (the encoder; a learnable inverse temperature). The
// NT-Xent loss's backward is checked in tests/oracle (against the oracle and
// AutoDiff).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "base/rng.hpp"
#include "casefile/case_json.hpp"
#include "step/run_case.hpp"
#include "step/strategy.hpp"

namespace infonce::step {
namespace {

// W ranks over P shards; shard d holds samples[d] samples; D = 2, F = 3;
// second views are the first plus noise; numbers from a seeded stream.
Case ntxent_case(std::int32_t world, const std::vector<std::int32_t>& samples,
                 std::int32_t micro_steps, std::uint64_t seed, bool learnable) {
  Rng rng(seed);
  const auto normal = [&] { return rng.normal(); };
  Case c;
  c.mesh = {world, static_cast<std::int32_t>(samples.size())};
  c.weight = Matrix<double>::NullaryExpr(2, 3, normal);
  c.accumulation_steps = micro_steps;
  c.learnable_temperature = learnable;
  NtXentSettings ntxent;
  ntxent.temperature = 0.4;
  for (std::int32_t m = 0; m < micro_steps; ++m) {
    auto& shards = ntxent.batches.emplace_back();
    for (const std::int32_t n : samples) {
      const Matrix<double> first = Matrix<double>::NullaryExpr(n, 3, normal);
      const Matrix<double> noise = Matrix<double>::NullaryExpr(n, 3, normal);
      shards.push_back({first, first + 0.3 * noise});
    }
  }
  c.ntxent = std::move(ntxent);
  validate_case(c);
  return c;
}

struct GroupGradients {
  Matrix<double> encoder;
  std::vector<double> direct;
};

GroupGradients step_gradients(const Case& c) {
  const DistributedResult result = run_on_fibers(c, StepVariant{}, RunOptions{});
  // A world gather's replicas take their rows' gradient from different slots:
  // under a sum over each DP group, the R groups agree up to rounding only.
  const bool world = c.strategy && c.strategy->group == GatherGroup::world;
  for (const auto& grad : result.grads) {
    if (!world) {
      EXPECT_EQ(grad, result.grads[0]);
      continue;
    }
    EXPECT_EQ(grad.size(), result.grads[0].size());
    if (grad.size() != result.grads[0].size()) continue;
    for (std::size_t i = 0; i < grad.size(); ++i) {
      EXPECT_NEAR(grad[i], result.grads[0][i], 1e-12 * (1.0 + std::abs(result.grads[0][i])));
    }
  }
  GroupGradients out;
  out.encoder =
      Eigen::Map<const Matrix<double>>(result.grads[0].data(), c.weight.rows(), c.weight.cols());
  out.direct.assign(result.grads[0].begin() + c.weight.size(), result.grads[0].end());
  return out;
}

double max_abs(const Matrix<double>& m) {
  return m.cwiseAbs().maxCoeff();
}

TEST(NtXentStep, TheCaseFileRoundTripsWithItsFamilyKeys) {
  const Case c = ntxent_case(4, {2, 1}, 2, 7, true);
  const std::string text = case_to_json(c);
  EXPECT_NE(text.find("\"family\": \"ntxent\""), std::string::npos) << text;
  EXPECT_EQ(text.find("\"loss\""), std::string::npos) << text;
  EXPECT_EQ(text.find("\"rng\""), std::string::npos) << text;
  const Case back = parse_case(text);
  ASSERT_TRUE(back.ntxent.has_value());
  EXPECT_EQ(back.weight, c.weight);
  EXPECT_EQ(back.ntxent->temperature, 0.4);
  EXPECT_TRUE(back.learnable_temperature);
  EXPECT_EQ(back.ntxent->batches[1][0].second, c.ntxent->batches[1][0].second);
  EXPECT_EQ(case_to_json(back), text);
  EXPECT_EQ(direct_parameter_names(back), (std::vector<std::string>{"inverse_temperature"}));
}

TEST(NtXentStep, KeysOfOtherFamiliesAndBadShapesAreRejectedByName) {
  const std::string text = case_to_json(ntxent_case(2, {1, 1}, 1, 3, false));
  const auto rejects = [&](const std::string& edited, const std::string& key) {
    try {
      parse_case(edited);
      ADD_FAILURE() << "accepted " << key;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
  };
  std::string with_rng = text;
  with_rng.insert(with_rng.find("\"accumulation\""),
                  "\"rng\": {\"mode\": \"synced\", \"seed\": 1},\n  ");
  rejects(with_rng, "rng");
  std::string no_family = text;
  no_family.erase(no_family.find("\"family\": \"ntxent\",\n  "),
                  std::string("\"family\": \"ntxent\",\n  ").size());
  rejects(no_family, "ntxent");
  std::string short_view = text;
  // The first sample's second view loses its first number: 2 numbers, F = 3.
  const std::size_t row = short_view.find("[[", short_view.find("\"second\"")) + 2;
  short_view.erase(row, short_view.find(',', row) - row + 1);
  rejects(short_view, "ntxent.batches[0][0].second");
  std::string cold = text;
  cold.replace(cold.find("\"temperature\": 0.4"), 18, "\"temperature\": -1");
  rejects(cold, "ntxent.temperature");
}

TEST(NtXentStep, TheSeedsFixIsRightForTheEncoderAndPTimesForALearnableTemperature) {
  // No strategy key: the trainer's point (detached gather, own slot live,
  // global loss, backward x P).
  const Case c = ntxent_case(2, {2, 3}, 1, 11, true);
  const ReferenceValues reference = compute_case_reference(c);
  const GroupGradients g = step_gradients(c);
  EXPECT_LE(max_abs(g.encoder - reference.grad), 1e-12 * max_abs(reference.grad_magnitude));
  ASSERT_EQ(g.direct.size(), 1u);
  EXPECT_NEAR(g.direct[0], 2.0 * reference.direct_grad[0], 1e-12 * reference.direct_magnitude[0]);
  const DistributedResult result = run_on_fibers(c, StepVariant{}, RunOptions{});
  for (const double loss : result.losses) EXPECT_NEAR(loss, reference.loss, 1e-13);
}

TEST(NtXentStep, EveryDpPointGivesItsPredictedRatiosWithEqualBatches) {
  // W = 4, P = 2 (two replicas), equal batches, two micro-steps.
  const Case base = ntxent_case(4, {2, 2}, 2, 5, true);
  const ReferenceValues reference = compute_case_reference(base);
  const StepShape shape{
      .dp = 2, .world = 4, .equal_batches = true, .use_batch = true, .copies_interact = true};
  std::int32_t dropped_terms = 0;
  for (const Strategy& strategy : dp_strategies()) {
    Case c = base;
    c.strategy = strategy;
    c.reduction = strategy.reduction;
    const GroupGradients g = step_gradients(c);
    const Prediction encoder = predict(strategy, ParameterGroup::encoders, shape);
    const Prediction direct = predict(strategy, ParameterGroup::direct, shape);
    ASSERT_NE(direct.verdict, Verdict::no_single_ratio) << name_of(strategy);
    EXPECT_NEAR(g.direct[0], direct.ratio * reference.direct_grad[0],
                1e-12 * std::max(1.0, direct.ratio) * reference.direct_magnitude[0])
        << name_of(strategy);
    const double scale = max_abs(reference.grad_magnitude);
    if (encoder.verdict == Verdict::no_single_ratio) {
      const double best =
          g.encoder.cwiseProduct(reference.grad).sum() / reference.grad.squaredNorm();
      EXPECT_GT(max_abs(g.encoder - best * reference.grad), 1e-6 * scale) << name_of(strategy);
      ++dropped_terms;
      continue;
    }
    EXPECT_LE(max_abs(g.encoder - encoder.ratio * reference.grad),
              1e-12 * std::max(1.0, encoder.ratio) * scale)
        << name_of(strategy);
  }
  EXPECT_EQ(dropped_terms, 12);  // the detached gathers with a local loss
}

// SPEC 13 on NT-Xent: without replicas a world gather is its dp twin, bit for
// bit; with them every row meets its own replica copies among its own view's
// rows (as InfoNCE's include_qq), so no world point is a multiple of the
// reference (predicted: replica copies), for the encoder or the temperature.
TEST(NtXentStep, WorldPointsAreTheirDpTwinsWithoutReplicasAndNoMultipleWithThem) {
  const Case twins = ntxent_case(2, {2, 2}, 1, 13, true);
  const Case replicated = ntxent_case(4, {2, 2}, 1, 13, true);
  const ReferenceValues reference = compute_case_reference(replicated);
  const StepShape shape{
      .dp = 2, .world = 4, .equal_batches = true, .use_batch = true, .copies_interact = true};
  for (const Strategy& dp : dp_strategies()) {
    Strategy world = dp;
    world.group = GatherGroup::world;
    Case at_dp = twins, at_world = twins;
    at_dp.strategy = dp;
    at_world.strategy = world;
    at_dp.reduction = at_world.reduction = dp.reduction;
    const DistributedResult a = run_on_fibers(at_dp, StepVariant{}, RunOptions{});
    const DistributedResult b = run_on_fibers(at_world, StepVariant{}, RunOptions{});
    EXPECT_EQ(a.grads, b.grads) << name_of(world);
    EXPECT_EQ(a.losses, b.losses) << name_of(world);
    EXPECT_EQ(predict(world, ParameterGroup::encoders, shape).cause, NoRatioCause::replica_copies);
    Case c = replicated;
    c.strategy = world;
    c.reduction = world.reduction;
    const GroupGradients g = step_gradients(c);
    if (dp.gather == GatherKind::detached && dp.scope == LossScope::global) continue;  // 0
    const double best = g.encoder.cwiseProduct(reference.grad).sum() / reference.grad.squaredNorm();
    EXPECT_GT(max_abs(g.encoder - best * reference.grad), 1e-6 * max_abs(reference.grad_magnitude))
        << name_of(world);
  }
}

// lightly's NTXentLoss(gather_distributed=True) after PR #1531: an autograd
// gather, a local loss. Exact with equal batches, no multiple with unequal ones.
TEST(NtXentStep, AnAutogradLocalLossIsExactOnlyWithEqualBatches) {
  const Strategy lightly{GatherKind::autograd, LossScope::local, BackwardScale::none,
                         Reduction::mean};
  Case equal = ntxent_case(2, {2, 2}, 1, 9, false);
  equal.strategy = lightly;
  const ReferenceValues equal_reference = compute_case_reference(equal);
  EXPECT_LE(max_abs(step_gradients(equal).encoder - equal_reference.grad),
            1e-12 * max_abs(equal_reference.grad_magnitude));
  Case unequal = ntxent_case(2, {1, 3}, 1, 9, false);
  unequal.strategy = lightly;
  const ReferenceValues reference = compute_case_reference(unequal);
  const GroupGradients g = step_gradients(unequal);
  const double best = g.encoder.cwiseProduct(reference.grad).sum() / reference.grad.squaredNorm();
  EXPECT_GT(max_abs(g.encoder - best * reference.grad), 1e-6 * max_abs(reference.grad_magnitude));
}

}  // namespace
}  // namespace infonce::step
