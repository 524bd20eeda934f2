// The data-parallel step on the fiber simulator, against hand-checkable
// expectations and the real trainer's recorded results.
#include <gtest/gtest.h>

#include <filesystem>

#include "casefile/case_json.hpp"
#include "step/mutants.hpp"
#include "step/rank_program.hpp"
#include "step/run_case.hpp"

namespace infonce::step {
namespace {

Case base_case(std::int32_t world, std::int32_t dp) {
  Case c;
  c.mesh = {world, dp};
  c.loss.temperature = 0.5;
  c.loss.padding = loss::Padding::fixed;
  c.weight = Matrix<double>{{1.0, 0.5}, {-0.25, 2.0}};
  // Two micro-steps; shard d of micro m has groups with the given negatives.
  const double x[] = {0.3, -1.2, 0.7, 0.9, -0.4, 1.5, 1.1, 0.2, -0.8, 0.6, 0.05, -0.3};
  std::int32_t next = 0;
  for (std::int32_t m = 0; m < 2; ++m) {
    auto& shards = c.batches.emplace_back();
    for (std::int32_t d = 0; d < dp; ++d) {
      loss::ShardBatch batch;
      batch.negative_counts = {1 + (d + m) % 2};
      const std::int32_t rows = batch.negative_counts[0] + 2;
      batch.features.resize(rows, 2);
      for (std::int32_t r = 0; r < rows; ++r) {
        batch.features(r, 0) = x[next++ % 12] + 0.1 * d;
        batch.features(r, 1) = x[next++ % 12] - 0.05 * m;
      }
      shards.push_back(batch);
    }
  }
  c.accumulation_steps = 2;
  return c;
}

TEST(CompensationScale, FollowsTheSpec) {
  Case c = base_case(4, 2);
  const StepVariant correct;
  EXPECT_EQ(compensation_scale(c, correct), 2.0);  // s = P, not W
  StepVariant by_world;
  Case mutated = c;
  find_mutant("scale-by-world")->apply(mutated, by_world);
  EXPECT_EQ(compensation_scale(c, by_world), 4.0);
  c.reduction = Reduction::sum;
  EXPECT_EQ(compensation_scale(c, correct), 1.0);  // a summing reducer needs none
  c.reduction = Reduction::mean;
  c.loss.use_batch = false;
  EXPECT_EQ(compensation_scale(c, correct), 1.0);  // no cross-rank negatives
  c.loss.use_batch = true;
  c.compensate = false;
  EXPECT_EQ(compensation_scale(c, correct), 1.0);
}

TEST(RankProgram, CompensatedStepEqualsReferenceAndUncompensatedIsOneOverP) {
  for (const auto& [world, dp] : {std::pair{2, 2}, {4, 2}, {4, 4}, {6, 3}}) {
    Case c = base_case(world, dp);
    const CaseReport fixed = run_case(c, nullptr, {});
    EXPECT_TRUE(fixed.pass) << "W=" << world << " P=" << dp << " rel_err=" << fixed.rel_err;
    EXPECT_LE(fixed.rel_err, 1e-13);
    ASSERT_TRUE(fixed.ratio.has_value());
    EXPECT_NEAR(*fixed.ratio, 1.0, 1e-13);

    c.compensate = false;
    const CaseReport before = run_case(c, nullptr, {});
    EXPECT_FALSE(before.pass);
    ASSERT_TRUE(before.ratio.has_value());
    EXPECT_NEAR(*before.ratio, 1.0 / dp, 1e-13) << "W=" << world << " P=" << dp;
    // The reported loss is unaffected by the fix: both equal the reference.
    EXPECT_NEAR(before.loss, fixed.reference.loss, 1e-13);
    EXPECT_NEAR(fixed.loss, fixed.reference.loss, 1e-13);
  }
}

TEST(RankProgram, ScheduleDoesNotChangeBits) {
  const Case c = base_case(8, 4);
  const DistributedResult fifo = run_on_fibers(c, {}, {});
  for (std::uint64_t seed : {1ULL, 2ULL, 99ULL}) {
    RunOptions options;
    options.schedule = {sim::ScheduleKind::random, seed};
    const DistributedResult other = run_on_fibers(c, {}, options);
    EXPECT_EQ(other.losses, fifo.losses);
    EXPECT_EQ(other.grads, fifo.grads);
  }
}

TEST(RankProgram, SumReductionNeedsNoCompensation) {
  Case c = base_case(4, 2);
  c.reduction = Reduction::sum;
  const CaseReport report = run_case(c, nullptr, {});
  EXPECT_TRUE(report.pass) << report.rel_err;
  // The compensate-under-sum mutant doubles the gradient (s = P = 2).
  const CaseReport mutant = run_case(c, find_mutant("compensate-under-sum"), {});
  ASSERT_TRUE(mutant.ratio.has_value());
  EXPECT_NEAR(*mutant.ratio, 2.0, 1e-13);
}

TEST(RankProgram, TensorAndObjectPathsGiveTheSameBits) {
  Case c = base_case(4, 4);
  const DistributedResult object = run_on_fibers(c, {}, {});
  c.gather = GatherPath::tensor;
  const DistributedResult tensor = run_on_fibers(c, {}, {});
  EXPECT_EQ(object.losses, tensor.losses);
  EXPECT_EQ(object.grads, tensor.grads);
}

TEST(RankProgram, ScaleByWorldIsWrongOnlyWithReplicas) {
  Case c = base_case(4, 2);  // R = 2
  const CaseReport wrong = run_case(c, find_mutant("scale-by-world"), {});
  ASSERT_TRUE(wrong.ratio.has_value());
  EXPECT_NEAR(*wrong.ratio, 2.0, 1e-13);  // W / P
  c = base_case(2, 2);                    // R = 1: W == P, the mutant is harmless
  EXPECT_TRUE(run_case(c, find_mutant("scale-by-world"), {}).pass);
}

// Every file of the real trainer's corpus: what real PyTorch DDP produced.
TEST(RealTrainer, EveryCaseMeetsItsExpectation) {
  const std::filesystem::path dir =
      std::filesystem::path(INFONCE_SOURCE_DIR) / "corpus/real-trainer/cases";
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  ASSERT_EQ(files.size(), 80u);
  for (const auto& file : files) {
    const Case c = read_case_file(file);
    ASSERT_TRUE(c.expect.has_value()) << file;
    const CaseReport report = run_case(c, nullptr, {});
    ASSERT_TRUE(report.expect.has_value());
    EXPECT_TRUE(report.expect->met) << file.filename() << " loss error " << report.expect->loss_error
                                    << " grad error " << report.expect->grad_error;
    const bool prefix = file.filename().string().find("-prefix") != std::string::npos;
    if (prefix && c.loss.use_batch && c.mesh.dp > 1) {
      // Before the fix the gradient is the reference divided by P.
      ASSERT_TRUE(report.ratio.has_value());
      EXPECT_NEAR(*report.ratio, 1.0 / c.mesh.dp, 1e-10) << file.filename();
    } else {
      EXPECT_LE(report.rel_err, 1e-12) << file.filename();
    }
  }
}

}  // namespace
}  // namespace infonce::step
