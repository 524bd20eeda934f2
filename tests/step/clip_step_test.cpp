// The CLIP family through the data-parallel step (issue 13, point 4): the
// case file's "family": "clip", the full-batch reference, and the rank
// program at every strategy point against step/strategy.hpp's prediction for
// both parameter groups (the towers; the log logit scale and the bias). The
// predictions themselves are checked against an independent brute force in
// strategy_test.cpp, the CLIP loss's backward in tests/loss/clip_test.cpp.
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

// W ranks over P shards; shard d holds pairs[d] pairs; D = 2, F_image = 3,
// F_text = 2; numbers from a seeded stream.
Case clip_case(std::int32_t world, const std::vector<std::int32_t>& pairs, std::int32_t micro_steps,
               std::uint64_t seed, bool bias) {
  Rng rng(seed);
  const auto normal = [&] { return rng.normal(); };
  Case c;
  c.mesh = {world, static_cast<std::int32_t>(pairs.size())};
  c.weight = Matrix<double>::NullaryExpr(2, 5, normal);
  c.accumulation_steps = micro_steps;
  ClipSettings clip;
  clip.image_features = 3;
  clip.text_normalize = false;
  clip.log_logit_scale = 1.2;
  if (bias) clip.logit_bias = -0.7;
  for (std::int32_t m = 0; m < micro_steps; ++m) {
    auto& shards = clip.batches.emplace_back();
    for (const std::int32_t n : pairs) {
      shards.push_back(
          {Matrix<double>::NullaryExpr(n, 3, normal), Matrix<double>::NullaryExpr(n, 2, normal)});
    }
  }
  c.clip = std::move(clip);
  validate_case(c);
  return c;
}

struct GroupGradients {
  Matrix<double> towers;
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
  out.towers =
      Eigen::Map<const Matrix<double>>(result.grads[0].data(), c.weight.rows(), c.weight.cols());
  out.direct.assign(result.grads[0].begin() + c.weight.size(), result.grads[0].end());
  return out;
}

double max_abs(const Matrix<double>& m) {
  return m.cwiseAbs().maxCoeff();
}

TEST(ClipStep, TheCaseFileRoundTripsWithItsFamilyKeys) {
  const Case c = clip_case(4, {2, 1}, 2, 7, true);
  const std::string text = case_to_json(c);
  EXPECT_NE(text.find("\"family\": \"clip\""), std::string::npos) << text;
  EXPECT_EQ(text.find("\"loss\""), std::string::npos) << text;
  EXPECT_EQ(text.find("\"encoder\""), std::string::npos) << text;
  const Case back = parse_case(text);
  ASSERT_TRUE(back.clip.has_value());
  EXPECT_EQ(back.weight, c.weight);
  EXPECT_EQ(back.clip->image_features, 3);
  EXPECT_EQ(back.clip->logit_bias, -0.7);
  EXPECT_EQ(back.clip->batches[1][0].text, c.clip->batches[1][0].text);
  EXPECT_EQ(case_to_json(back), text);
  EXPECT_EQ(direct_parameter_names(back),
            (std::vector<std::string>{"log_logit_scale", "logit_bias"}));
}

TEST(ClipStep, InfoNceKeysInAClipCaseAreRejectedByName) {
  const std::string text = case_to_json(clip_case(2, {1, 1}, 1, 3, false));
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
  no_family.erase(no_family.find("\"family\": \"clip\",\n  "),
                  std::string("\"family\": \"clip\",\n  ").size());
  rejects(no_family, "clip");
  std::string unequal = text;
  // One more number in the text tower's first row: F_text 3 against shards of 2.
  const std::size_t tower = unequal.find("[[", unequal.find("\"text_tower\""));
  unequal.insert(tower + 2, "1.5,");
  rejects(unequal, "clip.text_tower.weight[1]");
}

TEST(ClipStep, TheSeedsFixIsRightForTheTowersAndPTimesForTheLogitScale) {
  // No strategy key: the trainer's point (detached gather, own slot live,
  // global loss, backward x P), as the seed's fix would be applied to CLIP.
  const Case c = clip_case(2, {2, 3}, 1, 11, false);
  const ReferenceValues reference = compute_case_reference(c);
  const GroupGradients g = step_gradients(c);
  EXPECT_LE(max_abs(g.towers - reference.grad), 1e-12 * max_abs(reference.grad));
  ASSERT_EQ(g.direct.size(), 1u);
  EXPECT_NEAR(g.direct[0], 2.0 * reference.direct_grad[0],
              1e-12 * std::abs(reference.direct_grad[0]));
  const CaseReport report = evaluate(c, run_on_fibers(c, StepVariant{}, RunOptions{}), reference);
  EXPECT_TRUE(report.grad_matches);
  ASSERT_TRUE(report.direct.has_value());
  EXPECT_FALSE(report.direct->matches);
  EXPECT_FALSE(report.pass);
}

TEST(ClipStep, EveryStrategyPointGivesItsPredictedRatiosWithEqualBatches) {
  // W = 4, P = 2 (two replicas), equal batches, two micro-steps, a bias.
  const Case base = clip_case(4, {2, 2}, 2, 5, true);
  const ReferenceValues reference = compute_case_reference(base);
  const StepShape shape{.dp = 2, .world = 4, .equal_batches = true, .use_batch = true};
  std::int32_t dropped_terms = 0;
  for (const Strategy& strategy : all_strategies()) {
    Case c = base;
    c.strategy = strategy;
    c.reduction = strategy.reduction;
    const GroupGradients g = step_gradients(c);
    const Prediction towers = predict(strategy, ParameterGroup::encoders, shape);
    const Prediction direct = predict(strategy, ParameterGroup::direct, shape);
    ASSERT_NE(direct.verdict, Verdict::no_single_ratio) << name_of(strategy);
    EXPECT_NEAR(g.direct[0], direct.ratio * reference.direct_grad[0],
                1e-12 * std::max(1.0, direct.ratio) * reference.direct_magnitude[0])
        << name_of(strategy);
    // The bias gradient is 0 up to rounding in every program (softmax invariance).
    EXPECT_LE(std::abs(g.direct[1]), 1e-14 * std::max(1.0, direct.ratio)) << name_of(strategy);
    const double scale = max_abs(reference.grad_magnitude);
    if (towers.verdict == Verdict::no_single_ratio) {
      // Dropped terms: no multiple of the reference.
      const double best =
          g.towers.cwiseProduct(reference.grad).sum() / reference.grad.squaredNorm();
      EXPECT_GT(max_abs(g.towers - best * reference.grad), 1e-6 * scale) << name_of(strategy);
      ++dropped_terms;
      continue;
    }
    EXPECT_LE(max_abs(g.towers - towers.ratio * reference.grad),
              1e-12 * std::max(1.0, towers.ratio) * scale)
        << name_of(strategy);
  }
  EXPECT_EQ(dropped_terms, 24);  // the detached gathers with a local loss, over either group
}

TEST(ClipStep, AnAutogradLocalLossIsNoMultipleWithUnequalBatches) {
  Case c = clip_case(2, {1, 3}, 1, 9, false);
  c.strategy =
      Strategy{GatherKind::autograd, LossScope::local, BackwardScale::none, Reduction::mean};
  const ReferenceValues reference = compute_case_reference(c);
  const GroupGradients g = step_gradients(c);
  const double best = g.towers.cwiseProduct(reference.grad).sum() / reference.grad.squaredNorm();
  EXPECT_GT(max_abs(g.towers - best * reference.grad), 1e-6 * max_abs(reference.grad_magnitude));
  // open_clip's --local-loss --gather-with-grad with equal batches is exact.
  const Case equal = clip_case(2, {2, 2}, 1, 9, false);
  Case at_point = equal;
  at_point.strategy = c.strategy;
  const ReferenceValues equal_reference = compute_case_reference(equal);
  EXPECT_LE(max_abs(step_gradients(at_point).towers - equal_reference.grad),
            1e-12 * max_abs(equal_reference.grad_magnitude));
}

}  // namespace
}  // namespace infonce::step
