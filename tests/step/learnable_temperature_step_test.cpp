// A learnable inverse temperature tau = 1/T through the data-parallel step
// and the reference (issue 13, point 3), against a closed form written here:
// one-dimensional embeddings (D = F = 1, no normalisation), one group [q, p]
// per DP shard, use_batch, so every logit is tau * q_g * p_j and
//   L = mean_g ( -tau q_g p_g + log sum_j exp(tau q_g p_j) ),
//   dL/dtau = mean_g ( -q_g p_g + sum_j softmax_gj q_g p_j ).
// The encoders' gradient is not what these tests are about (the campaign
// covers it); the direct parameter's ratio per strategy point is.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "base/error.hpp"
#include "casefile/case_json.hpp"
#include "step/run_case.hpp"
#include "step/strategy.hpp"

namespace infonce::step {
namespace {

struct Pair {
  double q;
  double p;
};

// dL/dtau of the closed form above, for the global batch `pairs`.
double closed_form_dtau(const std::vector<Pair>& pairs, double tau) {
  double total = 0;
  for (const Pair& g : pairs) {
    double denominator = 0;
    double weighted = 0;
    for (const Pair& j : pairs) {
      const double e = std::exp(tau * g.q * j.p);
      denominator += e;
      weighted += e * g.q * j.p;
    }
    total += -g.q * g.p + weighted / denominator;
  }
  return total / static_cast<double>(pairs.size());
}

// W = `world` ranks over P = pairs.size() shards, shard d holding pair d.
Case one_pair_per_shard(const std::vector<Pair>& pairs, std::int32_t world, double temperature) {
  Case c;
  c.mesh = {world, static_cast<std::int32_t>(pairs.size())};
  c.loss.temperature = temperature;
  c.loss.padding = loss::Padding::fixed;
  c.encoder_normalize = false;
  c.weight = Matrix<double>{{1.0}};
  c.learnable_temperature = true;
  auto& shards = c.batches.emplace_back();
  for (const Pair& pair : pairs) {
    loss::ShardBatch batch;
    batch.negative_counts = {0};
    batch.features = Matrix<double>{{pair.q}, {pair.p}};
    shards.push_back(batch);
  }
  validate_case(c);
  return c;
}

double step_dtau(const Case& c) {
  RunOptions options;
  const DistributedResult result = run_on_fibers(c, StepVariant{}, options);
  EXPECT_EQ(result.grads[0].size(), 2u);  // W's one entry, then 1/T's
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
  return result.grads[0].back();
}

const std::vector<Pair> kPairs{{1.0, 0.8}, {-0.5, 1.5}, {2.0, -0.25}};
constexpr double kTemperature = 0.5;  // tau = 2

TEST(LearnableTemperatureStep, TheReferenceIsTheClosedForm) {
  const Case c = one_pair_per_shard(kPairs, 3, kTemperature);
  const ReferenceValues reference = compute_case_reference(c);
  ASSERT_EQ(reference.direct_grad.size(), 1u);
  EXPECT_NEAR(reference.direct_grad[0], closed_form_dtau(kPairs, 2.0), 1e-14);
  EXPECT_GE(reference.direct_magnitude[0], std::abs(reference.direct_grad[0]));
}

TEST(LearnableTemperatureStep, TheSeedsFixGivesTheTemperatureP) {
  // The trainer's own point: detached gather with the own slot live, global
  // loss, backward scaled by P. Every rank already holds the whole dL/dtau, so
  // the scale makes it P x the full-batch gradient (docs/strategies.md).
  const Case c = one_pair_per_shard(kPairs, 3, kTemperature);
  EXPECT_NEAR(step_dtau(c), 3.0 * closed_form_dtau(kPairs, 2.0), 1e-13);
  const CaseReport report =
      evaluate(c, run_on_fibers(c, StepVariant{}, RunOptions{}), compute_case_reference(c));
  ASSERT_TRUE(report.direct.has_value());
  EXPECT_FALSE(report.direct->matches);
  ASSERT_TRUE(report.direct->ratio.has_value());
  EXPECT_NEAR(*report.direct->ratio, 3.0, 1e-12);
  EXPECT_FALSE(report.pass);
}

TEST(LearnableTemperatureStep, BeforeTheFixTheTemperatureIsRight) {
  Case c = one_pair_per_shard(kPairs, 3, kTemperature);
  c.compensate = false;
  EXPECT_NEAR(step_dtau(c), closed_form_dtau(kPairs, 2.0), 1e-14);
}

TEST(LearnableTemperatureStep, EachStrategyPointGivesItsPredictedRatio) {
  // With replicas (W = 6, P = 3) so that the mean over W and the sum over the
  // DP group differ; equal batches (one group per shard).
  const Case base = one_pair_per_shard(kPairs, 6, kTemperature);
  const double full_batch = closed_form_dtau(kPairs, 2.0);
  const StepShape shape{.dp = 3, .world = 6, .equal_batches = true, .use_batch = true};
  for (const Strategy& strategy : all_strategies()) {
    Case c = base;
    c.strategy = strategy;
    c.reduction = strategy.reduction;
    const Prediction prediction = predict(strategy, ParameterGroup::direct, shape);
    ASSERT_NE(prediction.verdict, Verdict::no_single_ratio) << name_of(strategy);
    EXPECT_NEAR(step_dtau(c), prediction.ratio * full_batch,
                1e-13 * std::max(1.0, prediction.ratio))
        << name_of(strategy);
  }
}

TEST(LearnableTemperatureStep, TheCaseFileKeyAndExpectDirectRoundTrip) {
  Case c = one_pair_per_shard(kPairs, 3, kTemperature);
  Expectation expect;
  expect.loss = 1.0;
  expect.grad = Matrix<double>{{0.5}};
  expect.direct = {0.25};
  c.expect = expect;
  const std::string text = case_to_json(c);
  EXPECT_NE(text.find("\"learnable_temperature\": true"), std::string::npos) << text;
  EXPECT_NE(text.find("\"direct\":{\"inverse_temperature\":0.25}"), std::string::npos) << text;
  const Case back = parse_case(text);
  EXPECT_TRUE(back.learnable_temperature);
  ASSERT_TRUE(back.expect.has_value());
  EXPECT_EQ(back.expect->direct, std::vector<double>{0.25});
  EXPECT_EQ(case_to_json(back), text);
}

TEST(LearnableTemperatureStep, ExpectDirectWithoutTheParameterIsRejected) {
  Case c = one_pair_per_shard(kPairs, 3, kTemperature);
  Expectation expect;
  expect.grad = Matrix<double>{{0.5}};
  expect.direct = {0.25};
  c.expect = expect;
  std::string text = case_to_json(c);
  const std::string key = "\"learnable_temperature\": true,\n";
  text.erase(text.find(key), key.size());
  try {
    parse_case(text);
    FAIL() << "accepted expect.direct without a direct parameter";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("expect.direct"), std::string::npos) << e.what();
  }
}

TEST(LearnableTemperatureStep, WithoutTheKeyTheFlatGradientIsTheWeightsAlone) {
  Case c = one_pair_per_shard(kPairs, 3, kTemperature);
  c.learnable_temperature = false;
  const DistributedResult result = run_on_fibers(c, StepVariant{}, RunOptions{});
  EXPECT_EQ(result.grads[0].size(), 1u);
  EXPECT_TRUE(compute_case_reference(c).direct_grad.empty());
  EXPECT_EQ(case_to_json(c).find("learnable_temperature"), std::string::npos);
}

}  // namespace
}  // namespace infonce::step
