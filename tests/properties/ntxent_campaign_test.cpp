// The NT-Xent family in the property campaign (SPEC section 14): generated
// NT-Xent cases through the harness's own step pass every property, the
// oracle judging every case; the trainer's step without the fix is caught.
#include <gtest/gtest.h>

#include "properties/campaign.hpp"
#include "properties/ntxent_case.hpp"
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
