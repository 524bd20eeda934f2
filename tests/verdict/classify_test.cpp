// classify: a step that runs one point, on the designed cases, matches that
// point, and only points that step/strategy.hpp predicts the same on every
// designed shape (the designed cases tell apart what the predictions do).
// The step is the rank program itself at the point (the conformance
// adapter's stand-in).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "properties/classify.hpp"
#include "step/run_case.hpp"
#include "step/strategy.hpp"

namespace infonce::properties {
namespace {

using step::Strategy;

StepRunner rank_program_at(const Strategy& point) {
  return [point](const Case& c, const step::ReferenceValues&) {
    if (c.reduction != point.reduction) throw StepDeclined("another reduction");
    Case at_point = c;
    at_point.strategy = point;
    step::RunOptions options;
    options.share_identical_losses = true;
    StepRun run;
    run.result = step::run_on_fibers(at_point, step::StepVariant{}, options);
    return run;
  };
}

// The loss's offset from the reference's, by docs/strategies.md: a world
// gather repeats every candidate R times, log R more in every row.
double loss_shift(const Strategy& point, const step::StepShape& shape) {
  const bool world_gather = shape.use_batch && point.group == step::GatherGroup::world;
  return world_gather ? std::log(static_cast<double>(shape.world / shape.dp)) : 0.0;
}

std::vector<std::pair<step::Verdict, double>> predictions(const Strategy& point) {
  std::vector<std::pair<step::Verdict, double>> out;
  for (const step::StepShape shape : {step::StepShape{2, 2, true, true},
                                      {2, 4, true, true},
                                      {2, 2, false, true},
                                      {4, 4, false, true},
                                      {1, 2, true, true},
                                      {2, 2, true, false}}) {
    for (const auto group : {step::ParameterGroup::encoders, step::ParameterGroup::direct}) {
      const step::Prediction p = step::predict(point, group, shape);
      out.emplace_back(p.verdict, p.verdict == step::Verdict::no_single_ratio ? 0.0 : p.ratio);
    }
    out.emplace_back(step::Verdict::correct, loss_shift(point, shape));
  }
  return out;
}

TEST(Classify, AStepAtOnePointMatchesItAndOnlyPointsPredictedAlike) {
  const auto every_case = [](const Case&) { return std::optional<std::string>(); };
  const std::vector<DesignedCase> cases = designed_cases(every_case, true, true, true);
  ASSERT_GE(cases.size(), 20u);
  for (const Strategy& runs : step::all_strategies()) {
    SCOPED_TRACE(step::name_of(runs));
    const Classification result = classify_step(cases, rank_program_at(runs));
    EXPECT_TRUE(result.failed.empty()) << result.failed.front();
    const std::vector<Strategy> matching = result.matching();
    EXPECT_NE(std::find(matching.begin(), matching.end(), runs), matching.end());
    for (const Strategy& other : matching) {
      EXPECT_EQ(predictions(other), predictions(runs)) << step::name_of(other) << " matched too";
    }
  }
}

TEST(Classify, AStepAtNoPointMatchesNoneAndEachPointIsRuledOutByACase) {
  const auto every_case = [](const Case&) { return std::optional<std::string>(); };
  const std::vector<DesignedCase> cases = designed_cases(every_case, true, false, false);
  // The correct point's gradients with a loss one larger on every rank.
  const StepRunner shifted = [](const Case& c, const step::ReferenceValues& reference) {
    StepRun run = rank_program_at({step::GatherKind::autograd, step::LossScope::global,
                                   step::BackwardScale::none, c.reduction})(c, reference);
    for (double& loss : run.result.losses) loss += 1.0;
    return run;
  };
  const Classification result = classify_step(cases, shifted);
  EXPECT_TRUE(result.matching().empty());
  for (const PointClassification& p : result.points) {
    EXPECT_GT(p.judged, 0) << step::name_of(p.point);
    EXPECT_FALSE(p.ruled_out_by.empty()) << step::name_of(p.point);
  }
}

}  // namespace
}  // namespace infonce::properties

namespace infonce::properties {
namespace {

// A step whose queries must hold one number of documents each (handshake
// unequal_documents false, as sentence-transformers and pytorch-metric-learning
// declare) still gets the designed meshes and batch shapes: with one negative
// per query, not refused as "unequal documents".
TEST(Classify, AStepNeedingEqualDocumentsGetsTheDesignsWithOneNegativePerQuery) {
  const StepSupports equal_documents = [](const Case& c) -> std::optional<std::string> {
    for (const auto& shards : c.batches) {
      for (const auto& shard : shards) {
        for (const std::int32_t k : shard.negative_counts) {
          if (k != c.batches[0][0].negative_counts.at(0)) return "unequal documents";
        }
      }
    }
    return std::nullopt;
  };
  std::vector<std::string> outside;
  const std::vector<DesignedCase> cases =
      designed_cases(equal_documents, true, false, false, &outside);
  EXPECT_TRUE(outside.empty()) << outside.front();
  std::int32_t adapted = 0;
  for (const DesignedCase& d : cases) {
    adapted += d.name.find("(one negative per query)") != std::string::npos;
    EXPECT_FALSE(equal_documents(d.c).has_value()) << d.name;
  }
  EXPECT_GT(adapted, 0);
  EXPECT_EQ(cases.size(),
            designed_cases([](const Case&) { return std::nullopt; }, true, false, false).size());
}

}  // namespace
}  // namespace infonce::properties

namespace infonce::properties {
namespace {

// pytorch-metric-learning's shape of bug: the gradient of a point, every rank
// reporting W x its loss. No point matches; the point's gradients are named
// (and only points whose gradients agree with it on every case).
TEST(Classify, AStepWhoseOnlyWrongValueIsTheLossNamesThePointsOfItsGradients) {
  const auto every_case = [](const Case&) { return std::optional<std::string>(); };
  const std::vector<DesignedCase> cases = designed_cases(every_case, true, false, false);
  const Strategy runs{step::GatherKind::detached_own_live, step::LossScope::global,
                      step::BackwardScale::world_size, Reduction::mean};
  const StepRunner doubled = [runs](const Case& c, const step::ReferenceValues& reference) {
    StepRun run = rank_program_at(runs)(c, reference);
    for (double& loss : run.result.losses) loss *= c.mesh.world;
    return run;
  };
  const Classification result = classify_step(cases, doubled);
  EXPECT_TRUE(result.matching().empty());
  bool named = false;
  for (const PointClassification& p : result.points) {
    named = named || (p.point == runs && p.gradients_match);
    if (p.gradients_match) {
      EXPECT_EQ(predictions(p.point), predictions(runs)) << step::name_of(p.point);
    }
  }
  EXPECT_TRUE(named);
  // The same step with its own loss: it matches, and nothing is "gradients only".
  const Classification honest = classify_step(cases, rank_program_at(runs));
  for (const PointClassification& p : honest.points) EXPECT_FALSE(p.gradients_match);
}

}  // namespace
}  // namespace infonce::properties

namespace infonce::properties {
namespace {

// What step/strategy.hpp predicts for a point on NT-Xent's designed shapes
// (each gathers; a row meets its own view's rows, so under a world gather
// its own replica copies too), and the loss's offset.
std::vector<std::pair<step::Verdict, double>> ntxent_predictions(const Strategy& point) {
  std::vector<std::pair<step::Verdict, double>> out;
  for (step::StepShape shape : {step::StepShape{2, 2, true, true},
                                {2, 4, true, true},
                                {2, 2, false, true},
                                {4, 4, false, true},
                                {1, 2, true, true},
                                {3, 3, false, true}}) {
    shape.copies_interact = true;
    for (const auto group : {step::ParameterGroup::encoders, step::ParameterGroup::direct}) {
      const step::Prediction p = step::predict(point, group, shape);
      out.emplace_back(p.verdict, p.verdict == step::Verdict::no_single_ratio ? 0.0 : p.ratio);
    }
    out.emplace_back(step::Verdict::correct, loss_shift(point, shape));
  }
  return out;
}

// classify on the NT-Xent family: a step at one point (the 72, world twins
// included) matches it, and only points predicted alike on every designed
// shape (lightly's shape: autograd/local).
TEST(Classify, AnNtXentStepAtOnePointMatchesItAndOnlyPointsPredictedAlike) {
  const auto every_case = [](const Case&) { return std::optional<std::string>(); };
  const std::vector<DesignedCase> cases = designed_ntxent_cases(every_case, true);
  ASSERT_GE(cases.size(), 12u);
  for (const Strategy& runs : step::all_strategies()) {
    SCOPED_TRACE(step::name_of(runs));
    const Classification result = classify_step(cases, rank_program_at(runs));
    EXPECT_TRUE(result.failed.empty()) << result.failed.front();
    const std::vector<Strategy> matching = result.matching();
    EXPECT_NE(std::find(matching.begin(), matching.end(), runs), matching.end());
    for (const Strategy& other : matching) {
      EXPECT_EQ(ntxent_predictions(other), ntxent_predictions(runs))
          << step::name_of(other) << " matched too";
    }
  }
}

// classify on the SigLIP family, as on NT-Xent: a step at one point matches
// it and only points predicted alike on every designed shape (a SigLIP row
// meets its own replica copies under a world gather, as an NT-Xent row does;
// open_clip's SigLipLoss: autograd/local).
TEST(Classify, ASigLipStepAtOnePointMatchesItAndOnlyPointsPredictedAlike) {
  const auto every_case = [](const Case&) { return std::optional<std::string>(); };
  const std::vector<DesignedCase> cases = designed_siglip_cases(every_case);
  ASSERT_GE(cases.size(), 6u);
  for (const DesignedCase& d : cases) ASSERT_TRUE(d.c.siglip.has_value()) << d.name;
  for (const Strategy& runs : step::all_strategies()) {
    SCOPED_TRACE(step::name_of(runs));
    const Classification result = classify_step(cases, rank_program_at(runs));
    EXPECT_TRUE(result.failed.empty()) << result.failed.front();
    const std::vector<Strategy> matching = result.matching();
    EXPECT_NE(std::find(matching.begin(), matching.end(), runs), matching.end());
    for (const Strategy& other : matching) {
      EXPECT_EQ(ntxent_predictions(other), ntxent_predictions(runs))
          << step::name_of(other) << " matched too";
    }
  }
}

}  // namespace
}  // namespace infonce::properties
