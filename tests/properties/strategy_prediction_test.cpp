// Two derivations of what each strategy point gives: step/strategy.hpp's
// (which the rank program's backward scale comes from) and prediction/'s,
// which the strategy campaign judges by and which shares no function with the
// step (issue 30). They must agree on every point, group and shape; the
// strategy campaign then checks the step against the second.
#include <gtest/gtest.h>

#include "prediction/strategy_prediction.hpp"
#include "step/strategy.hpp"

namespace infonce {
namespace {

TEST(StrategyPrediction, AgreesWithTheStepsDerivationEverywhere) {
  std::int32_t compared = 0;
  for (const Strategy& strategy : step::all_strategies()) {
    for (const bool encoders : {true, false}) {
      for (std::int32_t dp = 1; dp <= 4; ++dp) {
        for (const std::int32_t replicas : {1, 3}) {
          for (const bool equal : {true, false}) {
            for (const bool use_batch : {true, false}) {
              const step::Prediction step_side = step::predict(
                  strategy,
                  encoders ? step::ParameterGroup::encoders : step::ParameterGroup::direct,
                  {.dp = dp, .world = dp * replicas, .equal_batches = equal,
                   .use_batch = use_batch});
              const prediction::Expected own = prediction::expected_gradient(
                  strategy,
                  encoders ? prediction::Parameters::encoders : prediction::Parameters::direct,
                  {.dp = dp, .world = dp * replicas, .equal_batches = equal,
                   .use_batch = use_batch});
              const std::string where = step::name_of(strategy) + (encoders ? " encoders" : " direct") +
                                        " P=" + std::to_string(dp) +
                                        " R=" + std::to_string(replicas);
              ++compared;
              EXPECT_EQ(own.needs_equal_batches, step_side.depends_on_equal_batches) << where;
              if (step_side.verdict == step::Verdict::no_single_ratio) {
                EXPECT_EQ(own.outcome, step_side.cause == step::NoRatioCause::dropped_terms
                                           ? prediction::Outcome::dropped_terms
                                           : prediction::Outcome::unequal_batches)
                    << where;
                continue;
              }
              ASSERT_EQ(own.outcome, prediction::Outcome::exact_multiple) << where;
              EXPECT_EQ(own.ratio(), step_side.ratio) << where;
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(compared, 36 * 2 * 4 * 2 * 2 * 2);
}

// A few points written out from docs/strategies.md, not from either derivation.
TEST(StrategyPrediction, HandPoints) {
  const prediction::StepShape shape{.dp = 4, .world = 8};
  const Strategy seed_fixed{};  // detached-own-live/global/scale-P/mean
  EXPECT_EQ(prediction::expected_gradient(seed_fixed, prediction::Parameters::encoders, shape).ratio(),
            1.0);
  Strategy before_fix = seed_fixed;
  before_fix.scale = BackwardScale::none;  // the bug: 1/P
  EXPECT_EQ(prediction::expected_gradient(before_fix, prediction::Parameters::encoders, shape).ratio(),
            0.25);
  Strategy scale_w = seed_fixed;
  scale_w.scale = BackwardScale::world_size;  // W / P = R
  EXPECT_EQ(prediction::expected_gradient(scale_w, prediction::Parameters::encoders, shape).ratio(),
            2.0);
  Strategy autograd_sum{GatherKind::autograd, LossScope::global, BackwardScale::none, Reduction::sum};
  EXPECT_EQ(prediction::expected_gradient(autograd_sum, prediction::Parameters::encoders, shape).ratio(),
            4.0);
  Strategy detached_local{GatherKind::detached, LossScope::local, BackwardScale::dp_shards,
                          Reduction::mean};
  EXPECT_EQ(prediction::expected_gradient(detached_local, prediction::Parameters::encoders, shape).outcome,
            prediction::Outcome::dropped_terms);
}

}  // namespace
}  // namespace infonce
