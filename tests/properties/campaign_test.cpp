// The campaign: the correct system passes; every mutant is caught and shrunk.
#include <algorithm>
#include <atomic>

#include <gtest/gtest.h>

#include "budget.hpp"
#include "properties/campaign.hpp"

namespace infonce::properties {
namespace {

std::int32_t total_groups(const CaseSpec& spec) {
  std::int32_t groups = 0;
  for (const auto& micro : spec.negatives) {
    for (const auto& shard : micro) groups += static_cast<std::int32_t>(shard.size());
  }
  return groups;
}

// Four seeds x 5,000 cases: 20,000 generated cases per CI run, on two cores.
class CorrectSystem : public testing::TestWithParam<std::uint64_t> {};

TEST_P(CorrectSystem, PassesEveryProperty) {
  CampaignOptions options;
  options.seed = GetParam();
  options.cases = scaled_budget(5000);
  const CampaignResult result = run_campaign(options);
  ASSERT_FALSE(result.failure.has_value())
      << "case " << result.failure->case_index << ": " << describe(result.failure->shrunk) << "\n"
      << result.failure->failures.front().property << ": "
      << result.failure->failures.front().detail;
  EXPECT_EQ(result.cases_run, options.cases);
  EXPECT_LT(result.discarded, result.cases_run / 10);
  EXPECT_LE(result.worst_rel_err, 1e-12);
  EXPECT_LE(result.worst_rel_err_float, 1e-5);
  // Every property was exercised.
  for (const auto& name : property_names()) {
    EXPECT_GT(result.property_checks.count(name) ? result.property_checks.at(name) : 0, 0) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, CorrectSystem, testing::Values(1, 2, 3, 4));

class MutantCaught : public testing::TestWithParam<std::string> {};

TEST_P(MutantCaught, WithinTenThousandCasesAndShrunkSmall) {
  const step::Mutant* mutant = step::find_mutant(GetParam());
  ASSERT_NE(mutant, nullptr);
  CampaignOptions options;
  options.seed = 1;
  options.cases = 10000;
  options.mutant = mutant;
  const CampaignResult result = run_campaign(options);
  ASSERT_TRUE(result.failure.has_value()) << mutant->name << " was not caught";
  const CampaignFailure& failure = *result.failure;
  // The registry's claim, exactly: the property the campaign reports first
  // (and shrinks by) is the one the mutant's entry names.
  EXPECT_EQ(failure.failures.front().property, property_catching(mutant->caught_by))
      << failure.failures.front().detail;
  EXPECT_LE(failure.shrunk.world, 4) << describe(failure.shrunk);
  EXPECT_LE(total_groups(failure.shrunk), 4 * failure.shrunk.accumulation_steps())
      << describe(failure.shrunk);
  EXPECT_LE(failure.shrunk.feature_dim, 2) << describe(failure.shrunk);
  EXPECT_LE(failure.shrunk.embedding_dim, 2) << describe(failure.shrunk);
}

std::vector<std::string> mutant_names() {
  std::vector<std::string> names;
  for (const auto& m : step::mutant_registry()) names.emplace_back(m.name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(Registry, MutantCaught, testing::ValuesIn(mutant_names()),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& ch : name) ch = ch == '-' ? '_' : ch;
                           return name;
                         });

TEST(Campaign, SameSeedSameResult) {
  CampaignOptions options;
  options.seed = 7;
  options.cases = scaled_budget(300);
  options.mutant = step::find_mutant("ga-twice");
  const CampaignResult a = run_campaign(options);
  const CampaignResult b = run_campaign(options);
  EXPECT_EQ(a.cases_run, b.cases_run);
  EXPECT_EQ(a.coverage, b.coverage);
  ASSERT_EQ(a.failure.has_value(), b.failure.has_value());
  if (a.failure) {
    EXPECT_EQ(a.failure->case_index, b.failure->case_index);
    EXPECT_EQ(describe(a.failure->shrunk), describe(b.failure->shrunk));
  }
}

}  // namespace
}  // namespace infonce::properties

namespace infonce::properties {
namespace {

// Everything a campaign reports, for comparisons.
void expect_same(const CampaignResult& a, const CampaignResult& b) {
  EXPECT_TRUE(static_cast<const Tally&>(a) == static_cast<const Tally&>(b));
  EXPECT_EQ(a.covered, b.covered);
  EXPECT_EQ(a.stopped_by, b.stopped_by);
  EXPECT_EQ(a.divergence, b.divergence);
  ASSERT_EQ(a.failure.has_value(), b.failure.has_value());
  if (a.failure) {
    EXPECT_EQ(a.failure->case_index, b.failure->case_index);
    EXPECT_EQ(a.failure->shrink_steps, b.failure->shrink_steps);
    EXPECT_EQ(describe(a.failure->shrunk), describe(b.failure->shrunk));
    EXPECT_EQ(a.failure->failures.size(), b.failure->failures.size());
  }
}

TEST(CampaignJobs, TwoWorkersGiveTheSequentialResult) {
  for (const char* mutant : {"", "own-slot-at-world-rank", "legacy-padding"}) {
    CampaignOptions options;
    options.seed = 21;
    options.cases = scaled_budget(600);
    options.mutant = *mutant ? step::find_mutant(mutant) : nullptr;
    const CampaignResult one = run_campaign(options);
    options.jobs = 2;
    const CampaignResult two = run_campaign(options);
    options.jobs = 3;
    const CampaignResult three = run_campaign(options);
    SCOPED_TRACE(mutant);
    expect_same(one, two);
    expect_same(one, three);
    if (one.failure) {
      // Counted up to and including the failing case, as the sequential loop did.
      EXPECT_EQ(one.cases_run, one.failure->case_index + 1);
      EXPECT_EQ(one.covered, (std::vector<IndexRange>{{0, one.cases_run}}));
    }
  }
}

TEST(CampaignStop, StoppingEndsAtACaseBoundaryOfTheSequentialRun) {
  CampaignOptions options;
  options.seed = 22;
  options.cases = kUnboundedCases;
  int polls = 0;
  options.stop_requested = [&polls] { return ++polls > 150; };  // one worker: one poll per case
  const CampaignResult stopped = run_campaign(options);
  EXPECT_EQ(stopped.stopped_by, StopReason::time);
  EXPECT_EQ(stopped.cases_run, 150);
  CampaignOptions counted;
  counted.seed = 22;
  counted.cases = 150;
  const CampaignResult same = run_campaign(counted);
  EXPECT_EQ(same.stopped_by, StopReason::cases);
  EXPECT_TRUE(static_cast<const Tally&>(stopped) == static_cast<const Tally&>(same));
}

TEST(CampaignStop, StoppingWithWorkersKeepsAPrefix) {
  CampaignOptions options;
  options.seed = 23;
  options.cases = kUnboundedCases;
  options.jobs = 2;
  std::atomic<int> polls{0};
  options.stop_requested = [&polls] { return ++polls > 300; };
  const CampaignResult stopped = run_campaign(options);
  ASSERT_EQ(stopped.covered.size(), 1u);
  EXPECT_EQ(stopped.covered[0].begin, 0);
  CampaignOptions counted;
  counted.seed = 23;
  counted.cases = stopped.cases_run;
  EXPECT_TRUE(static_cast<const Tally&>(stopped) ==
              static_cast<const Tally&>(run_campaign(counted)));
}

TEST(CampaignShards, ShardsCoverDisjointBlocksThatAddUpToTheWhole) {
  CampaignOptions whole;
  whole.seed = 24;
  whole.cases = 5 * kBlockCases + 17;  // a partial last block
  const CampaignResult all = run_campaign(whole);
  Tally sum;
  std::vector<std::int64_t> blocks;
  for (std::int64_t i = 0; i < 3; ++i) {
    CampaignOptions shard = whole;
    shard.shard = {i, 3};
    shard.keep_blocks = true;
    const CampaignResult part = run_campaign(shard);
    sum.merge(part);
    for (const BlockRecord& block : part.blocks) {
      EXPECT_EQ(block.block % 3, i);
      blocks.push_back(block.block);
    }
  }
  std::sort(blocks.begin(), blocks.end());
  EXPECT_EQ(blocks, (std::vector<std::int64_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_TRUE(sum == static_cast<const Tally&>(all));
  EXPECT_EQ(all.cases_run, 5 * kBlockCases + 17);
}

TEST(CampaignSelfCheck, EverySixteenthCaseAgreesBitForBit) {
  CampaignOptions options;
  options.seed = 25;
  options.cases = scaled_budget(320);
  options.self_check = true;
  const CampaignResult result = run_campaign(options);
  EXPECT_EQ(result.self_checked, (options.cases + 15) / 16);
  EXPECT_FALSE(result.divergence.has_value()) << result.divergence->detail;
}

TEST(CampaignReplay, ReplayingTheFailingIndexShrinksToTheSameCase) {
  CampaignOptions options;
  options.seed = 1;
  options.cases = 2000;
  options.mutant = step::find_mutant("scale-by-world");
  options.jobs = 2;
  const CampaignResult result = run_campaign(options);
  ASSERT_TRUE(result.failure.has_value());
  options.jobs = 1;
  const CaseReplay replay = replay_case(options, result.failure->case_index);
  ASSERT_TRUE(replay.failure.has_value());
  EXPECT_EQ(describe(replay.failure->shrunk), describe(result.failure->shrunk));
  EXPECT_EQ(replay.failure->shrink_steps, result.failure->shrink_steps);
  EXPECT_EQ(replay.failure->failures.front().detail, result.failure->failures.front().detail);
}

}  // namespace
}  // namespace infonce::properties
