// validate_case on cases built in memory, the reference problem of a case,
// its padding plan, and the per-rank padding seeds.
#include <limits>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "base/error.hpp"
#include "base/rng.hpp"
#include "casefile/case.hpp"
#include "casefile/case_json.hpp"
#include "tests/casefile/bad_case_table.hpp"

namespace infonce {
namespace {

Case valid_case() {
  return parse_case(testing::kValidCaseText);
}

std::string validation_error(const Case& c) {
  try {
    validate_case(c);
  } catch (const InputError& error) {
    return error.what();
  }
  return "(valid)";
}

// --- validate_case on in-memory cases (what generators and shrinkers build)

TEST(ValidateCase, AcceptsTheValidCase) {
  EXPECT_EQ(validation_error(valid_case()), "(valid)");
}

TEST(ValidateCase, FeatureRowsMustMatchTheGroups) {
  Case c = valid_case();
  c.batches[1][0].negative_counts = {3};  // the group has 4 rows, not 5
  EXPECT_EQ(validation_error(c), "batches[1][0]: features have 4 rows, the groups need 5");
}

TEST(ValidateCase, FeatureColumnsMustBeF) {
  Case c = valid_case();
  c.batches[0][1].features = Matrix<double>::Zero(4, 2);
  EXPECT_EQ(
      validation_error(c),
      "batches[0][1]: features have 2 columns, expected 3 (F, the columns of encoder.weight)");
}

TEST(ValidateCase, NamesANonFiniteFeatureByGroupRowAndColumn) {
  Case c = valid_case();
  // Shard 1 of micro-step 0 holds one group of 4 rows; row 3 is its 2nd negative.
  c.batches[0][1].features(3, 2) = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(validation_error(c), "batches[0][1][0][3][2]: expected a finite number, got nan");
}

TEST(ValidateCase, RejectsANegativeNegativeCount) {
  Case c = valid_case();
  c.loss.hard_negatives.reset();
  c.padding_draws.reset();
  c.batches[0][0].negative_counts = {-1};
  c.batches[0][0].features = Matrix<double>::Zero(1, 3);
  EXPECT_EQ(validation_error(c), "batches[0][0][0]: a group needs at least 2 rows (q, p), got 1");
}

TEST(ValidateCase, RejectsNonFiniteSettingsAndWeights) {
  Case c = valid_case();
  c.loss.temperature = std::numeric_limits<double>::infinity();
  EXPECT_EQ(validation_error(c), "loss.temperature: expected a finite number, got inf");
  c = valid_case();
  c.weight(1, 0) = -std::numeric_limits<double>::infinity();
  EXPECT_EQ(validation_error(c), "encoder.weight[1][0]: expected a finite number, got -inf");
}

TEST(ValidateCase, RejectsMissingMicroStepsAndShards) {
  Case c = valid_case();
  c.padding_draws.reset();
  c.batches.pop_back();
  EXPECT_EQ(validation_error(c), "batches: expected 2 micro-steps (accumulation.steps), got 1");
  c = valid_case();
  c.batches[1].pop_back();
  EXPECT_EQ(validation_error(c), "batches[1]: expected 2 DP shards (mesh.dp), got 1");
}

TEST(ValidateCase, ExpectGradMustHaveTheWeightsShape) {
  Case c = valid_case();
  c.expect->grad = Matrix<double>::Zero(3, 2);
  EXPECT_EQ(validation_error(c),
            "expect.grad: expected 2 x 3 numbers (the shape of encoder.weight), got 3 x 2");
}

// --- padding seeds

TEST(PaddingSeed, SyncedRanksShareTheCaseSeed) {
  Case c = valid_case();
  c.rng_seed = 12345;
  for (std::int32_t w = 0; w < c.mesh.world; ++w) EXPECT_EQ(padding_seed_of_rank(c, w), 12345u);
}

TEST(PaddingSeed, PerRankSeedsAreDerivedPerWorldRank) {
  Case c = valid_case();
  c.rng_mode = RngMode::per_rank;
  c.rng_seed = 12345;
  std::set<std::uint64_t> seeds;
  for (std::int32_t w = 0; w < c.mesh.world; ++w) {
    EXPECT_EQ(padding_seed_of_rank(c, w), 12345u + static_cast<std::uint64_t>(w));
    seeds.insert(padding_seed_of_rank(c, w));
  }
  EXPECT_EQ(seeds.size(), 4u);
}

// --- the reference problem

TEST(ReferenceProblem, CopiesTheCase) {
  const Case c = valid_case();
  const loss::ReferenceProblem problem = reference_problem(c);
  EXPECT_EQ(problem.settings.hard_negatives, 2);
  EXPECT_EQ(problem.settings.temperature, 0.1);
  EXPECT_EQ(problem.weight, c.weight);
  EXPECT_TRUE(problem.normalize);
  EXPECT_TRUE(problem.accumulation_normalize);
  ASSERT_EQ(problem.micro_batches.size(), 2u);
  ASSERT_EQ(problem.micro_batches[0].size(), 2u);
  EXPECT_EQ(problem.micro_batches[1][1].features, c.batches[1][1].features);
  EXPECT_EQ(problem.micro_batches[0][1].negative_counts, c.batches[0][1].negative_counts);
}

TEST(ReferenceProblem, SumsOverShardsOnlyForALocalLossUnderASumReduction) {
  Case c = valid_case();
  for (const bool use_batch : {true, false}) {
    for (const Reduction reduction : {Reduction::mean, Reduction::sum}) {
      c.loss.use_batch = use_batch;
      c.reduction = reduction;
      EXPECT_EQ(reference_problem(c).sum_over_shards, !use_batch && reduction == Reduction::sum)
          << "use_batch " << use_batch << ", sum " << (reduction == Reduction::sum);
    }
  }
}

// --- the reference padding plan

TEST(ReferencePadding, RecordedDrawsWithUseBatchUseShardZerosStream) {
  Case c = valid_case();
  c.padding_draws = loss::RecordedDraws{{{1}, {0}}, {{}, {}}};
  const auto plan = reference_padding(c);
  EXPECT_EQ(plan->source(0, 0).draw(2), 1);  // shard 0's draw, not shard 1's 0
  // Shard 1's draws belong to the distributed run only: not reported unused.
  EXPECT_NO_THROW(plan->check_all_used());
}

TEST(ReferencePadding, RecordedDrawsWithoutUseBatchUseOneStreamPerShard) {
  Case c = valid_case();
  c.loss.use_batch = false;
  c.padding_draws = loss::RecordedDraws{{{1}, {0}}, {{}, {}}};
  const auto plan = reference_padding(c);
  EXPECT_EQ(plan->source(0, 0).draw(2), 1);
  EXPECT_THROW(plan->check_all_used(), InputError);  // shard 1's draw is still due
  EXPECT_EQ(plan->source(0, 1).draw(2), 0);
  EXPECT_NO_THROW(plan->check_all_used());
}

TEST(ReferencePadding, GeneratedStreamDIsTheFirstReplicaOfShardD) {
  Case c = valid_case();
  c.padding_draws.reset();
  c.rng_mode = RngMode::per_rank;
  c.rng_seed = 99;
  ASSERT_EQ(c.mesh.replicas(), 2);
  const auto plan = reference_padding(c);
  // Shard 1's first replica is world rank 2, not rank 1.
  loss::GeneratedPadding expected({99, 101});
  loss::GeneratedPadding rank_one({100});
  bool differs_from_rank_one = false;
  for (int i = 0; i < 32; ++i) {
    EXPECT_EQ(plan->source(0, 0).draw(1000), expected.source(0, 0).draw(1000));
    const std::int32_t draw = plan->source(0, 1).draw(1000);
    EXPECT_EQ(draw, expected.source(0, 1).draw(1000));
    differs_from_rank_one = differs_from_rank_one || draw != rank_one.source(0, 0).draw(1000);
  }
  EXPECT_TRUE(differs_from_rank_one);
}

}  // namespace
}  // namespace infonce
