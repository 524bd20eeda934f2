// What `check --strategies all --family all` prints: one row per cell
// (family x point) with its cases, each parameter group's predictions and
// what the step showed, and whether the cell is as predicted; then, for a
// cell that is not, its first differing case and the command that runs it.
#pragma once

#include <ostream>
#include <string>

#include "properties/strategy_grid.hpp"

namespace infonce::cli {

struct StrategyGridReport {
  std::string program;  // argv[0], for the reproduce commands
  std::string limits;   // "default" or "typical"
  properties::StrategyGridOptions options;
  properties::StrategyGridResult result;
};

void print_strategy_grid(std::ostream& out, const StrategyGridReport& report);

}  // namespace infonce::cli
