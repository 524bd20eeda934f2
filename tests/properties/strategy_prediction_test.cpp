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

prediction::Outcome outcome_of(step::NoRatioCause cause) {
  switch (cause) {
    case step::NoRatioCause::dropped_terms:
      return prediction::Outcome::dropped_terms;
    case step::NoRatioCause::unequal_batches:
      return prediction::Outcome::unequal_batches;
    default:
      return prediction::Outcome::replica_copies;
  }
}

TEST(StrategyPrediction, AgreesWithTheStepsDerivationEverywhere) {
  std::int32_t compared = 0;
  for (const Strategy& strategy : step::all_strategies()) {
    for (const bool encoders : {true, false}) {
      for (std::int32_t dp = 1; dp <= 4; ++dp) {
        for (const std::int32_t replicas : {1, 3}) {
          for (const bool equal : {true, false}) {
            for (const bool use_batch : {true, false}) {
              for (const bool interact : {false, true}) {
                const step::Prediction step_side = step::predict(
                    strategy,
                    encoders ? step::ParameterGroup::encoders : step::ParameterGroup::direct,
                    {.dp = dp, .world = dp * replicas, .equal_batches = equal,
                     .use_batch = use_batch, .copies_interact = interact});
                const prediction::Expected own = prediction::expected_gradient(
                    strategy,
                    encoders ? prediction::Parameters::encoders : prediction::Parameters::direct,
                    {.dp = dp, .world = dp * replicas, .equal_batches = equal,
                     .use_batch = use_batch, .copies_interact = interact});
                const std::string where = step::name_of(strategy) +
                                          (encoders ? " encoders" : " direct") +
                                          " P=" + std::to_string(dp) +
                                          " R=" + std::to_string(replicas) +
                                          (interact ? " copies interact" : "");
                ++compared;
                EXPECT_EQ(own.needs_equal_batches, step_side.depends_on_equal_batches) << where;
                if (step_side.verdict == step::Verdict::no_single_ratio) {
                  EXPECT_EQ(own.outcome, outcome_of(step_side.cause)) << where;
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
  }
  EXPECT_EQ(compared, 72 * 2 * 4 * 2 * 2 * 2 * 2);
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

// The world group (issue 29, finding 8), from docs/strategies.md's table: a
// tevatron-like trainer (own slot live, scale W, mean, gather over the world)
// is correct; the dp reading of the same code predicted W / P.
TEST(StrategyPrediction, WorldGroupHandPoints) {
  const prediction::StepShape shape{.dp = 4, .world = 8};  // R = 2
  const auto encoders = [&](Strategy s, prediction::StepShape at = {.dp = 4, .world = 8}) {
    return prediction::expected_gradient(s, prediction::Parameters::encoders, at);
  };
  Strategy tevatron{GatherKind::detached_own_live, LossScope::global, BackwardScale::world_size,
                    Reduction::mean, GatherGroup::world};
  EXPECT_EQ(encoders(tevatron).ratio(), 1.0);
  tevatron.group = GatherGroup::dp;
  EXPECT_EQ(encoders(tevatron).ratio(), 2.0);  // W / P: what `strategies` said before
  Strategy seed_world{GatherKind::detached_own_live, LossScope::global, BackwardScale::dp_shards,
                      Reduction::mean, GatherGroup::world};
  EXPECT_EQ(encoders(seed_world).ratio(), 0.5);  // 1 / R
  seed_world.reduction = Reduction::sum;
  EXPECT_EQ(encoders(seed_world).ratio(), 2.0);  // P / R
  // An autograd gather sums W ranks' 1/R shares: P per row, as over the DP group.
  Strategy autograd_world{GatherKind::autograd, LossScope::global, BackwardScale::none,
                          Reduction::mean, GatherGroup::world};
  EXPECT_EQ(encoders(autograd_world).ratio(), 1.0);
  // One shard, two replicas: the dp group gathers nothing, the world group
  // gathers two copies; detached leaves no row live.
  Strategy detached_world{GatherKind::detached, LossScope::global, BackwardScale::none,
                          Reduction::mean, GatherGroup::world};
  EXPECT_EQ(encoders(detached_world, {.dp = 1, .world = 2}).ratio(), 0.0);
  detached_world.group = GatherGroup::dp;
  EXPECT_EQ(encoders(detached_world, {.dp = 1, .world = 2}).ratio(), 1.0);
  // A query meeting its own replica copy (qq) has no multiple; without replicas it has.
  EXPECT_EQ(encoders(autograd_world, {.dp = 2, .world = 4, .copies_interact = true}).outcome,
            prediction::Outcome::replica_copies);
  EXPECT_EQ(encoders(autograd_world, {.dp = 2, .world = 2, .copies_interact = true}).ratio(), 1.0);
  // The direct parameters do not see the group: log R is a constant.
  EXPECT_EQ(prediction::expected_gradient(Strategy{.scale = BackwardScale::none,
                                                   .group = GatherGroup::world},
                                          prediction::Parameters::direct, shape)
                .ratio(),
            1.0);
}

}  // namespace
}  // namespace infonce
