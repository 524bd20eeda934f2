// The loss families the strategy campaign runs, one entry each: what names
// the family (--family, report rows), how its cases are drawn (the
// campaign's FamilyChoice, which strategy_case turns into the family's case
// of a spec), how a spec reads as its case, where its cells sit in a
// campaign result, and the suffix of its witness case files
// (`strategies --cases-dir`). `strategies` (a shrunk case per wrong cell
// and family) and `check --strategies all --family all` (the grid) iterate
// this table. A new family (SigLIP) is one entry here once the campaign can
// draw it: a FamilyChoice value that strategy_case builds the family's case
// for, the family's cells in StrategyCampaignResult (tallied by
// tally_strategy_case, counted by mismatched()), and a describe of a spec.
#pragma once

#include <array>
#include <span>
#include <string>
#include <string_view>

#include "properties/case_spec.hpp"
#include "properties/strategy_campaign.hpp"
#include "step/strategy.hpp"

namespace infonce::properties {

using StrategyCells = std::array<StrategyCell, step::kPointCount>;

struct StrategyFamily {
  std::string_view key;          // "infonce": as --family and the reports name it
  FamilyChoice choice;           // the campaign's draw of this family alone
  std::string_view file_suffix;  // witness files: "POINT" + suffix + "[-direct].json"
  std::string (*describe)(const CaseSpec& spec);  // the spec as this family's case reads it
  // The family's cells (all_strategies() order) in a campaign result:
  // result.*cells.
  StrategyCells StrategyCampaignResult::*cells;
};

// Every family, in report order (InfoNCE first).
std::span<const StrategyFamily> strategy_families();

// The entry of a single family (not FamilyChoice::both).
const StrategyFamily& strategy_family(FamilyChoice choice);

}  // namespace infonce::properties
