// The NT-Xent family in the property campaign (SPEC section 14): generated
// NT-Xent cases through the harness's own step pass every property, the
// oracle judging every case; the trainer's step without the fix is caught.
#include <gtest/gtest.h>

#include "properties/campaign.hpp"
#include "properties/ntxent_case.hpp"
#include "properties/strategy_campaign.hpp"
#include "step/strategy.hpp"
#include "tests/properties/budget.hpp"

namespace infonce::properties {
namespace {

CampaignOptions ntxent_only(std::int64_t cases) {
  CampaignOptions options;
  options.seed = 20261207;
  options.cases = scaled_budget(cases);
  options.oracle = OracleMode::every;
  options.limits.restriction.infonce = false;
  options.limits.restriction.ntxent = true;
  return options;
}

TEST(NtXentCampaign, GeneratedCasesPassEveryPropertyWithTheOracleOnEveryCase) {
  const CampaignResult result = run_campaign(ntxent_only(400));
  ASSERT_FALSE(result.failure.has_value()) << "case " << result.failure->case_index << ": "
                                           << describe_ntxent(result.failure->shrunk) << "\n"
                                           << result.failure->failures.front().property << ": "
                                           << result.failure->failures.front().detail;
  EXPECT_EQ(result.cases_run, scaled_budget(400));
  EXPECT_LT(result.discarded, result.cases_run / 10);
  EXPECT_LE(result.worst_rel_err, 1e-12);
}

// The family's cases are NT-Xent cases (not InfoNCE ones with another name).
TEST(NtXentCampaign, TheRestrictionBuildsNtXentCases) {
  Restriction r;
  r.infonce = false;
  r.ntxent = true;
  CaseSpec spec;
  spec.world = 2;
  spec.dp = 2;
  spec.negatives = {{{0, 1}, {2}}};
  spec.data_seed = 3;
  const Case c = build_restricted_case(spec, r);
  ASSERT_TRUE(c.ntxent.has_value());
  EXPECT_EQ(c.ntxent->batches[0][0].first.rows(), 2);
  EXPECT_EQ(c.ntxent->batches[0][1].second.rows(), 1);
}

}  // namespace
}  // namespace infonce::properties

namespace infonce::properties {
namespace {

// The strategy campaign on the NT-Xent family (check --strategies all --family
// ntxent): every one of the 72 points (36 dp, 36 world twins on cases with
// replicas) behaves as step/strategy.hpp and prediction/ predict, the oracle
// judging every reference; learnable temperatures on every other case.
TEST(NtXentCampaign, EveryStrategyCellBehavesAsPredicted) {
  StrategyCampaignOptions options;
  options.seed = 1;
  options.cases = 4000;
  options.families = FamilyChoice::ntxent;
  options.oracle = true;
  const StrategyCampaignResult result = run_strategy_campaign(options);
  EXPECT_EQ(result.cases, 4000);
  const auto all = step::all_strategies();
  std::int64_t counterexamples = 0;
  for (std::size_t i = 0; i < all.size(); ++i) {
    const StrategyCell& cell = result.ntxent_cells[i];
    SCOPED_TRACE("ntxent " + step::name_of(all[i]));
    EXPECT_EQ(result.cells[i].cases + result.clip_cells[i].cases, 0);
    EXPECT_GT(cell.cases, 0);
    EXPECT_EQ(cell.mismatched, 0) << cell.first_mismatch;
    counterexamples += cell.counterexamples;
    if (all[i].group == step::GatherGroup::dp) {
      EXPECT_GT(cell.confirmed, 0);
    }
  }
  EXPECT_GT(counterexamples, 0);  // dropped terms and unequal local batches, shown
}

}  // namespace
}  // namespace infonce::properties
