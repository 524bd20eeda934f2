// The campaign: the correct system passes; every mutant is caught and shrunk.
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
      << result.failure->failures.front().property << ": " << result.failure->failures.front().detail;
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
  // An equivalent mutant runs the whole budget, so it gets a smaller one.
  options.cases = mutant->caught_by == step::CaughtBy::none ? scaled_budget(2000) : 10000;
  options.mutant = mutant;
  const CampaignResult result = run_campaign(options);
  if (mutant->caught_by == step::CaughtBy::none) {
    // An equivalent mutant: nothing can tell it apart; finding a difference
    // would mean our model of it is wrong.
    EXPECT_FALSE(result.failure.has_value());
    return;
  }
  ASSERT_TRUE(result.failure.has_value()) << mutant->name << " was not caught";
  const CampaignFailure& failure = *result.failure;
  const std::string expected = mutant->caught_by == step::CaughtBy::gradient ? kGradientMatches
                               : mutant->caught_by == step::CaughtBy::padding ? kPaddingSkipsPositive
                                                                              : kEqualLoss;
  bool caught_as_expected = false;
  for (const auto& f : failure.failures) caught_as_expected |= f.property == expected;
  caught_as_expected |= failure.failures.front().property == kNoCrash;  // the trainer would crash
  EXPECT_TRUE(caught_as_expected) << failure.failures.front().property;
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
