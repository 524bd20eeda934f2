// The strategy campaign over a grid of cells, one cell per (loss family,
// strategy point) (`check --strategies all --family all`): every cell gets
// an even share of the case budget, not a drawn one, so every world point
// and every family is run as much as the rest. Cell k (families in
// strategy_families() order, points in all_strategies() order) runs the
// campaign indices [first_index, first_index + cases) at its point and
// family alone: case i of it is `check --strategies POINT --family FAMILY
// --case-index i`. The cells run on `jobs` threads; the result does not
// depend on them.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "properties/generators.hpp"
#include "properties/strategy_campaign.hpp"
#include "properties/strategy_families.hpp"
#include "step/strategy.hpp"

namespace infonce::properties {

struct StrategyGridOptions {
  std::uint64_t seed = 1;
  std::int64_t cases = 3600;  // split evenly over the cells
  GeneratorLimits limits = default_limits();
  std::vector<const StrategyFamily*> families;  // empty: every family
  std::vector<step::Strategy> points;           // empty: all_strategies()
  bool oracle = true;                           // oracle/ judges every reference
  std::int32_t jobs = 1;
};

// One parameter group's predictions over a cell's judged cases, by
// step::Verdict (correct, ratio, no single ratio), and how many of each the
// step showed as predicted (a no-single-ratio case: a counterexample).
struct GroupTally {
  std::array<std::int64_t, 3> predicted{};
  std::array<std::int64_t, 3> shown{};
};

struct StrategyGridCell {
  const StrategyFamily* family = nullptr;
  step::Strategy point;
  std::int64_t first_index = 0;
  StrategyCell cell;  // as the strategy campaign tallies it
  // Cases with replicas (W > P): where a world point's gather differs from
  // its dp twin's (on the others the two are the same step).
  std::int64_t with_replicas = 0;
  GroupTally encoders;
  GroupTally direct;  // the cases with direct parameters
  std::int64_t judged() const { return cell.cases - cell.discarded - cell.near_ties; }
  // No case differed from its prediction, and some case was judged.
  bool as_predicted() const { return cell.mismatched == 0 && judged() > 0; }
};

struct StrategyGridResult {
  std::vector<StrategyGridCell> cells;
  std::int64_t cases = 0;
  std::int64_t oracle_judged = 0;
  std::int64_t cells_not_as_predicted() const;
};

StrategyGridResult run_strategy_grid(const StrategyGridOptions& options);

}  // namespace infonce::properties
