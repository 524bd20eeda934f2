// check --strategies POINT --sut: a step is judged at the named point by its
// loss and both parameter groups' gradients against the harness's rank
// program at that point, not only by the prediction's outcome category. The
// SUT here is the rank program itself run at another point (an in-process
// stand-in for the conformance adapter with a strategy option): judged at any
// point whose prediction differs from its own on some shape, it must fail.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "casefile/case_json.hpp"
#include "../properties/budget.hpp"
#include "properties/strategy_campaign.hpp"
#include "step/run_case.hpp"
#include "step/strategy.hpp"

namespace infonce::properties {
namespace {

using step::Strategy;

// A step that runs `point` whatever the case names (a trainer's own point);
// its DDP reduction is the case's, so it declines a case of another one (as
// the conformance adapter with a strategy option does).
StepRunner rank_program_at(const Strategy& point, double loss_shift = 0) {
  return [point, loss_shift](const Case& c, const step::ReferenceValues&) {
    if (c.reduction != point.reduction) throw StepDeclined("another reduction");
    Case at_point = c;
    at_point.strategy = point;
    step::RunOptions options;
    options.share_identical_losses = true;
    StepRun run;
    run.result = step::run_on_fibers(at_point, step::StepVariant{}, options);
    for (double& loss : run.result.losses) loss += loss_shift;
    return run;
  };
}

StrategyCampaignOptions judged_at(const Strategy& judge, const StepRunner& step,
                                  FamilyChoice family, std::int64_t cases) {
  StrategyCampaignOptions options;
  options.seed = 3;
  options.cases = cases;
  options.limits = typical_limits();
  options.only = judge;
  options.families = family;
  options.runner = step;
  return options;
}

const Strategy kAlwaysCorrect{step::GatherKind::autograd, step::LossScope::global,
                              step::BackwardScale::none, Reduction::mean};
const Strategy kDroppedTerms{step::GatherKind::detached_own_live, step::LossScope::local,
                             step::BackwardScale::none, Reduction::mean};

// A correct trainer's gradient is 1 x the reference: "a multiple of the
// reference" does not make it the point's step, which predicts no single ratio.
TEST(PointJudge, ACorrectStepFailsAtAPointThatPredictsNoSingleRatio) {
  for (const FamilyChoice family : {FamilyChoice::infonce, FamilyChoice::clip}) {
    const StrategyCampaignResult result = run_strategy_campaign(
        judged_at(kDroppedTerms, rank_program_at(kAlwaysCorrect), family, 60));
    EXPECT_GT(result.mismatched(), 0) << (family == FamilyChoice::clip ? "clip" : "infonce");
  }
}

// The point's own gradients with another loss: the loss is judged too.
TEST(PointJudge, AStepWithThePointsGradientsAndAnotherLossFails) {
  const StrategyCampaignResult result = run_strategy_campaign(
      judged_at(kAlwaysCorrect, rank_program_at(kAlwaysCorrect, 0.5), FamilyChoice::both, 20));
  EXPECT_GT(result.mismatched(), 0);
  for (const auto& [cause, group] : result.mismatches_by_cause) {
    EXPECT_EQ(cause, "loss differs from the point's rank program") << group.lines.front();
  }
}

// What step/strategy.hpp predicts for a point on a few designed shapes, both
// groups: two points whose lists differ are told apart by some shape. (CLIP
// always gathers: no shape without use_batch.)
// The loss's offset from the reference's, by docs/strategies.md: a world
// gather repeats every candidate R times, log R more in every row.
double loss_shift(const Strategy& point, const step::StepShape& shape) {
  const bool world_gather = shape.use_batch && point.group == step::GatherGroup::world;
  return world_gather ? std::log(static_cast<double>(shape.world / shape.dp)) : 0.0;
}

std::vector<std::pair<step::Verdict, double>> predictions(const Strategy& point,
                                                          FamilyChoice family) {
  std::vector<step::StepShape> shapes{{2, 2, true, true},  {2, 4, true, true}, {2, 2, false, true},
                                      {4, 8, false, true}, {1, 2, true, true}};
  if (family == FamilyChoice::infonce) shapes.push_back({2, 4, true, false});
  std::vector<std::pair<step::Verdict, double>> out;
  for (const step::StepShape& shape : shapes) {
    for (const auto group : {step::ParameterGroup::encoders, step::ParameterGroup::direct}) {
      const step::Prediction p = step::predict(point, group, shape);
      out.emplace_back(p.verdict, p.verdict == step::Verdict::no_single_ratio ? 0.0 : p.ratio);
    }
    out.emplace_back(step::Verdict::correct, loss_shift(point, shape));
  }
  return out;
}

// The first case index in [0, max_cases) where the step mismatches, if any.
std::optional<std::int64_t> first_mismatch(StrategyCampaignOptions options,
                                           std::int64_t max_cases) {
  for (std::int64_t index = 0; index < max_cases; ++index) {
    options.first_case = index;
    options.cases = index + 1;
    if (run_strategy_campaign(options).mismatched() > 0) return index;
  }
  return std::nullopt;
}

TEST(PointJudge, EveryPointFailsAtEveryPointPredictedOtherwiseInBothFamilies) {
  const auto all = step::all_strategies();
  // Under the sanitizers, every 16th pair (a different sample per family).
  const std::int64_t every = scaled_budget(16) == 16 ? 1 : 16;
  std::int64_t pairs = 0, judged = 0, world_pairs = 0;
  for (const FamilyChoice family : {FamilyChoice::infonce, FamilyChoice::clip}) {
    for (const Strategy& runs : all) {
      for (const Strategy& judge : all) {
        // (Points of two reductions are judged against two references: a step of
        // one reduction is declined at the other.)
        if (runs == judge || runs.reduction != judge.reduction) continue;
        if (predictions(runs, family) == predictions(judge, family)) continue;
        if (pairs++ % every != 0) continue;
        ++judged;
        world_pairs += runs.group != judge.group ? 1 : 0;
        const auto index = first_mismatch(judged_at(judge, rank_program_at(runs), family, 0), 48);
        EXPECT_TRUE(index.has_value())
            << (family == FamilyChoice::clip ? "clip: " : "infonce: ") << step::name_of(runs)
            << " passed when judged at " << step::name_of(judge);
      }
    }
  }
  EXPECT_GT(judged, 0);
  // A point and its twin over the other group differ (by the loss's log R at
  // least, with replicas): such pairs are judged too.
  EXPECT_GT(world_pairs, 0);
  std::printf("%lld ordered pairs judged, %lld of them across the two groups\n",
              static_cast<long long>(judged), static_cast<long long>(world_pairs));
}

TEST(PointJudge, AStepRunningThePointPassesAtIt) {
  for (const Strategy& point : step::all_strategies()) {
    const StrategyCampaignResult result = run_strategy_campaign(
        judged_at(point, rank_program_at(point), FamilyChoice::both, scaled_budget(24)));
    EXPECT_EQ(result.mismatched(), 0) << step::name_of(point);
  }
}

// A mismatch shrinks for its cause, and the shrunk case file and the
// campaign index both reproduce it.
TEST(PointJudge, AMismatchShrinksAndReproducesByFileAndByIndex) {
  const auto all = step::all_strategies();
  const std::vector<std::pair<Strategy, Strategy>> pairs{
      {kAlwaysCorrect, kDroppedTerms}, {kDroppedTerms, kAlwaysCorrect}, {all[4], all[30]}};
  for (const auto& [runs, judge] : pairs) {
    SCOPED_TRACE(step::name_of(runs) + " judged at " + step::name_of(judge));
    StrategyCampaignOptions options =
        judged_at(judge, rank_program_at(runs), FamilyChoice::both, 0);
    const auto index = first_mismatch(options, 48);
    ASSERT_TRUE(index.has_value());
    options.first_case = *index;
    options.cases = *index + 1;
    const StrategyCampaignResult by_index = run_strategy_campaign(options);
    ASSERT_EQ(by_index.mismatches_by_cause.size(), 1u);
    const std::string cause = by_index.mismatches_by_cause.begin()->first;
    const StrategyShrunk shrunk = shrink_strategy_mismatch(options, *index, cause, 300);
    EXPECT_EQ(shrunk.result.observation, StrategyObservation::mismatch);
    EXPECT_EQ(shrunk.result.cause, cause);
    const Case from_file = parse_case(case_to_json(shrunk.shrunk_case));
    const StrategyCaseResult again = check_strategy_case(from_file, options.runner);
    EXPECT_EQ(again.observation, StrategyObservation::mismatch);
    EXPECT_EQ(again.cause, cause);
    // Running the campaign index again gives the same verdict.
    EXPECT_EQ(run_strategy_campaign(options).mismatched(), 1);
  }
}

}  // namespace
}  // namespace infonce::properties
