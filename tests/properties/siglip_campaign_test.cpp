// The SigLIP family in the strategy campaign (SPEC section 15): every one of
// the 72 points behaves as prediction/ derives for SigLIP (the generic
// derivation, a world gather's replica copies interacting: an image meets its
// pair's copies as negatives), the oracle judging every reference.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace infonce::properties
