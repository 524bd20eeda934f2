// Recording the hard-negative padding draws (step/recorded_padding): the
// recorded draws are the ones the generators make, in the trainer's order, and
// a generated case with its draws recorded is the same step bit for bit.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "base/error.hpp"
#include "base/rng.hpp"
#include "properties/campaign.hpp"
#include "properties/case_spec.hpp"
#include "step/recorded_padding.hpp"
#include "step/run_case.hpp"

namespace infonce::step {
namespace {

using Draws = std::vector<std::int32_t>;

std::int64_t budget(std::int64_t cases) {
  const char* sanitized = std::getenv("INFONCE_SANITIZER_BUILD");
  return sanitized != nullptr && sanitized[0] == '1' ? cases / 10 : cases;
}

// negatives[micro][dp rank][group]; features from a fixed stream.
Case hand_case(std::int32_t world, std::int32_t dp,
               const std::vector<std::vector<std::vector<std::int32_t>>>& negatives) {
  Case c;
  c.mesh = {world, dp};
  c.loss.hard_negatives = 4;
  c.loss.padding = loss::Padding::fixed;
  c.rng_seed = 7;
  c.weight = Matrix<double>{{1.0, 0.5}, {-0.25, 2.0}, {0.3, -0.7}};
  Rng data(99);
  for (const auto& micro : negatives) {
    auto& shards = c.batches.emplace_back();
    for (const auto& ks : micro) {
      loss::ShardBatch batch;
      batch.negative_counts = ks;
      std::int32_t rows = 0;
      for (std::int32_t k : ks) rows += k + 2;
      batch.features.resize(rows, 2);
      for (std::int64_t i = 0; i < batch.features.size(); ++i)
        batch.features.data()[i] = data.normal();
      shards.push_back(batch);
    }
  }
  c.accumulation_steps = static_cast<std::int32_t>(negatives.size());
  return c;
}

// Micro-step 0: shard 0 has groups with 1 and 3 negatives, shard 1 one with 2;
// micro-step 1: shard 0 one with 5 (trimmed, no draw), shard 1 one with 1. H = 4.
const std::vector<std::vector<std::vector<std::int32_t>>> kNegatives = {{{1, 3}, {2}}, {{5}, {1}}};

TEST(RecordPaddingDraws, UseBatchPadsTheGatheredBatchInGroupOrderRunningOnAcrossMicroSteps) {
  const Case c = hand_case(4, 2, kNegatives);
  // The expected draws, straight from the generator: group by group over the
  // union (shard 0's groups, then shard 1's), H - k draws of [0, k) each.
  Rng rng(7);
  auto take = [&rng](int count, std::uint64_t k) {
    Draws out;
    for (int i = 0; i < count; ++i) out.push_back(static_cast<std::int32_t>(rng.below(k)));
    return out;
  };
  Draws micro0 = take(3, 1);
  const Draws g1 = take(1, 3);
  const Draws g2 = take(2, 2);
  micro0.insert(micro0.end(), g1.begin(), g1.end());
  micro0.insert(micro0.end(), g2.begin(), g2.end());
  const Draws micro1 = take(3, 1);
  const loss::RecordedDraws expected = {{micro0, micro0}, {micro1, micro1}};  // synced: one stream
  EXPECT_EQ(record_padding_draws(c), expected);
}

TEST(RecordPaddingDraws, WithoutUseBatchEachShardPadsItsOwnGroups) {
  Case c = hand_case(2, 2, kNegatives);
  c.loss.use_batch = false;
  Rng shard0(7), shard1(7);  // synced: both generators start from one seed
  const Draws s0m0 = {
      static_cast<std::int32_t>(shard0.below(1)), static_cast<std::int32_t>(shard0.below(1)),
      static_cast<std::int32_t>(shard0.below(1)), static_cast<std::int32_t>(shard0.below(3))};
  const Draws s1m0 = {static_cast<std::int32_t>(shard1.below(2)),
                      static_cast<std::int32_t>(shard1.below(2))};
  const Draws s1m1 = {static_cast<std::int32_t>(shard1.below(1)),
                      static_cast<std::int32_t>(shard1.below(1)),
                      static_cast<std::int32_t>(shard1.below(1))};
  const loss::RecordedDraws expected = {{s0m0, s1m0}, {{}, s1m1}};
  EXPECT_EQ(record_padding_draws(c), expected);
}

TEST(RecordPaddingDraws, PerRankModeRecordsEachShardsFirstReplica) {
  Case c = hand_case(4, 2, kNegatives);
  c.rng_mode = RngMode::per_rank;
  const loss::RecordedDraws draws = record_padding_draws(c);
  ASSERT_EQ(draws.size(), 2u);
  // Shard 1's first replica is world rank 2: seed 7 + 2. Its first draw over
  // the union is from [0, 3) (the 4th draw; the first three are from [0, 1)).
  Rng rank2(9);
  for (int i = 0; i < 3; ++i) rank2.below(1);
  EXPECT_EQ(draws[0][1].at(3), static_cast<std::int32_t>(rank2.below(3)));
  Rng rank0(7);
  for (int i = 0; i < 3; ++i) rank0.below(1);
  EXPECT_EQ(draws[0][0].at(3), static_cast<std::int32_t>(rank0.below(3)));
}

TEST(RecordPaddingDraws, DrawIndicesDoNotDependOnThePaddingVariant) {
  Case fixed = hand_case(4, 2, kNegatives);
  Case legacy = fixed;
  legacy.loss.padding = loss::Padding::legacy;
  EXPECT_EQ(record_padding_draws(fixed), record_padding_draws(legacy));
}

TEST(RecordPaddingDraws, NothingIsDrawnWithoutHardNegatives) {
  Case c = hand_case(4, 2, kNegatives);
  c.loss.hard_negatives.reset();
  EXPECT_EQ(record_padding_draws(c), loss::RecordedDraws(2, std::vector<Draws>(2)));
  EXPECT_FALSE(with_recorded_padding(c).padding_draws.has_value());
}

TEST(RecordPaddingDraws, RecordedDrawsAreReturnedAsTheyAre) {
  Case c = hand_case(2, 2, {{{1}, {1}}});
  c.padding_draws = loss::RecordedDraws{{{0, 0, 0}, {0, 0, 0}}};
  EXPECT_EQ(record_padding_draws(c), *c.padding_draws);
  EXPECT_EQ(with_recorded_padding(c).padding_draws, c.padding_draws);
}

TEST(RecordPaddingDraws, AGroupWithoutNegativesIsTheTrainersAssertion) {
  const Case c = hand_case(2, 2, {{{1, 0}, {1}}});
  EXPECT_THROW(record_padding_draws(c), InputError);
}

TEST(RecordPaddingDraws, AnInvalidCaseIsAnInputError) {
  Case c = hand_case(4, 2, kNegatives);
  c.batches[1].pop_back();  // micro-step 1 lacks DP shard 1
  EXPECT_THROW(record_padding_draws(c), InputError);
}

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
}

bool same_bits(const Matrix<double>& a, const Matrix<double>& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() &&
         std::memcmp(a.data(), b.data(), static_cast<std::size_t>(a.size()) * sizeof(double)) == 0;
}

std::int64_t draw_count(const loss::RecordedDraws& draws) {
  std::int64_t count = 0;
  for (const auto& micro : draws) {
    for (const auto& stream : micro) count += static_cast<std::int64_t>(stream.size());
  }
  return count;
}

// The step and the reference of `c` with generators and with recorded draws
// give the same bits. Returns false when the reference rejects the case.
bool expect_same_step(const Case& generated) {
  ReferenceValues ref_generated;
  try {
    ref_generated = compute_case_reference(generated);
  } catch (const InputError&) {
    return false;  // every logit masked: the trainer gives NaN, we reject the case
  }
  const Case recorded = with_recorded_padding(generated);
  const ReferenceValues ref_recorded = compute_case_reference(recorded);
  EXPECT_TRUE(same_bits(ref_generated.grad, ref_recorded.grad));
  EXPECT_EQ(std::memcmp(&ref_generated.loss, &ref_recorded.loss, sizeof(double)), 0);
  const DistributedResult a = run_on_fibers(generated, StepVariant{}, {});
  const DistributedResult b = run_on_fibers(recorded, StepVariant{}, {});
  EXPECT_TRUE(same_bits(a.losses, b.losses));
  for (std::size_t w = 0; w < a.grads.size(); ++w) EXPECT_TRUE(same_bits(a.grads[w], b.grads[w]));
  EXPECT_EQ(a.padded_positives, b.padded_positives);
  return true;
}

TEST(WithRecordedPadding, GeneratedCasesAreTheSameStepBitForBit) {
  std::int64_t checked = 0, with_draws = 0, legacy_with_positive = 0;
  for (std::int64_t i = 0; i < budget(300); ++i) {
    const properties::CaseSpec spec =
        properties::generate_case(11, i, properties::typical_limits()).value();
    if (spec.hard_negatives == 0) continue;
    const Case c = properties::build_case(spec);
    SCOPED_TRACE(properties::describe(spec));
    if (!expect_same_step(c)) continue;
    ++checked;
    with_draws += draw_count(record_padding_draws(c)) > 0 ? 1 : 0;
    Case legacy = c;  // the trainer's padding before its fix, same draws
    legacy.loss.padding = loss::Padding::legacy;
    if (expect_same_step(legacy)) {
      legacy_with_positive +=
          run_on_fibers(with_recorded_padding(legacy), {}, {}).padded_positives > 0;
    }
  }
  // Not vacuous: most hard-negative cases pad some group.
  EXPECT_GE(checked, budget(100));
  EXPECT_GE(with_draws, checked / 2);
  EXPECT_GE(legacy_with_positive, 1);
}

TEST(WithRecordedPadding, PerRankModeWithoutReplicasIsTheSameStep) {
  std::int64_t checked = 0;
  for (std::int64_t i = 0; i < budget(300) && checked < budget(40); ++i) {
    properties::CaseSpec spec =
        properties::generate_case(12, i, properties::typical_limits()).value();
    if (spec.hard_negatives == 0) continue;
    spec.world = spec.dp;  // R = 1: recorded stream d is world rank d's own
    Case c = properties::build_case(spec);
    c.rng_mode = RngMode::per_rank;
    SCOPED_TRACE(properties::describe(spec));
    checked += expect_same_step(c) ? 1 : 0;
  }
  EXPECT_GE(checked, budget(40));
}

TEST(WithRecordedPadding, PerRankModeWithReplicasFeedsEveryReplicaItsShardsStream) {
  Case c = hand_case(4, 2, kNegatives);
  c.rng_mode = RngMode::per_rank;
  // Generators: world ranks 0..3 draw from seeds 7..10, so replicas of one
  // shard pad differently and report different losses (SPEC section 3).
  const DistributedResult generated = run_on_fibers(c, {}, {});
  EXPECT_NE(generated.losses[0], generated.losses[1]);
  // Recorded: every replica of shard d replays stream d (seed 7 + 2d): the
  // replicas of a shard now agree, and shard 0's ranks match the generator's rank 0.
  const DistributedResult recorded = run_on_fibers(with_recorded_padding(c), {}, {});
  EXPECT_EQ(recorded.losses[0], recorded.losses[1]);
  EXPECT_EQ(recorded.losses[2], recorded.losses[3]);
  EXPECT_EQ(recorded.losses[0], generated.losses[0]);
  EXPECT_EQ(recorded.losses[2], generated.losses[2]);
}

}  // namespace
}  // namespace infonce::step
