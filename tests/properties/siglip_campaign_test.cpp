// The SigLIP family in the strategy campaign (SPEC section 15): every one of
// the 72 points behaves as prediction/ derives for SigLIP (the generic
// derivation, a world gather's replica copies interacting: an image meets its
// pair's copies as negatives), the oracle judging every reference.
#include <gtest/gtest.h>

#include "properties/siglip_case.hpp"
#include "properties/strategy_campaign.hpp"
#include "step/strategy.hpp"

namespace infonce::properties {
namespace {

TEST(SigLipCampaign, EveryStrategyCellBehavesAsPredicted) {
  StrategyCampaignOptions options;
  options.seed = 1;
  options.cases = 3000;
  options.families = FamilyChoice::siglip;
  options.oracle = true;
  const StrategyCampaignResult result = run_strategy_campaign(options);
  EXPECT_EQ(result.cases, 3000);
  EXPECT_EQ(result.oracle_judged(), result.oracle_judged_clip());  // no InfoNCE case
  EXPECT_GT(result.oracle_judged(), 2900);
  const auto all = step::all_strategies();
  std::int64_t counterexamples = 0;
  for (std::size_t i = 0; i < all.size(); ++i) {
    const StrategyCell& cell = result.siglip_cells[i];
    SCOPED_TRACE("siglip " + step::name_of(all[i]));
    EXPECT_EQ(result.cells[i].cases + result.clip_cells[i].cases + result.ntxent_cells[i].cases, 0);
    EXPECT_GT(cell.cases, 0);
    EXPECT_EQ(cell.mismatched, 0) << cell.first_mismatch;
    counterexamples += cell.counterexamples;
    if (all[i].group == step::GatherGroup::dp) {
      EXPECT_GT(cell.confirmed, 0);
      EXPECT_GT(cell.direct_confirmed + cell.direct_one_number, 0);
    }
  }
  EXPECT_GT(counterexamples, 0);  // dropped terms, unequal local batches, replica copies
}

// A SigLIP cell's first mismatch names the case in SigLIP's terms (pairs=,
// bias_shifted=), not InfoNCE's (negatives=, qq=): the 1,000,000-case grid's
// report (docs/strategy-grid-1m.txt) had InfoNCE's for its SigLIP cells.
TEST(SigLipCampaign, AFirstMismatchIsDescribedAsSigLip) {
  StrategyCampaignOptions options;
  options.families = FamilyChoice::siglip;
  CaseSpec spec;
  const Case c =
      strategy_case(1, 867437, options.limits, parse_strategy_choice("autograd/local/scale-P/sum"),
                    &spec, &options);
  ASSERT_TRUE(c.siglip.has_value());
  StrategyCaseResult mismatch;
  mismatch.strategy = *c.strategy;
  mismatch.observation = StrategyObservation::mismatch;
  mismatch.detail = "a mismatch made up for the report";
  StrategyCampaignResult result;
  tally_strategy_case(867437, c, mismatch, result, &spec);
  const std::string& line = result.siglip_cells[strategy_index(*c.strategy)].first_mismatch;
  EXPECT_EQ(line, "case 867437 (siglip " + describe_siglip(spec) + "): " + mismatch.detail);
  EXPECT_NE(line.find(" pairs=[[1],[1]] "), std::string::npos) << line;
  EXPECT_EQ(line.find("negatives="), std::string::npos) << line;
  EXPECT_EQ(line.find(" qq="), std::string::npos) << line;
}

}  // namespace
}  // namespace infonce::properties
