// What `check --strategies` reports: the table of points (human), the
// mismatches grouped by cause (every cause, a bounded number of cases each,
// with the command that replays each case by index), and the same as JSON
// (infonce-strategy-report/1) or JUnit (one test case per family and point).
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "properties/strategy_campaign.hpp"

namespace infonce::cli {

struct StrategyReport {
  std::string program;       // argv[0], for the reproduce commands
  std::uint64_t seed = 1;
  std::int64_t cases = 0;    // the budget asked for
  std::string limits;        // "default" or "typical"
  std::string point;         // --strategies: "all" or a point's name
  std::string family;        // --family: "both", "infonce" or "clip"
  bool oracle = true;        // the reference judged by oracle/ (--oracle every)
  std::optional<std::string> sut_command, sut_timeout, sut_name;
  std::vector<std::string> restrict_options;  // --restrict, as given
  std::vector<std::string> restricted_axes;   // the report's lines
  // Per cause of mismatch: its first case shrunk, and the case file saved.
  struct Shrunk {
    std::string cause;
    std::string text;    // the shrunk spec, one line
    std::string detail;  // what the shrunk case's step gave
    std::int32_t steps = 0;
    std::string saved;   // the case file ("" with --no-corpus)
  };
  std::vector<Shrunk> shrunk;
  properties::StrategyCampaignResult result;
  bool passed() const { return result.mismatched() == 0; }
};

// The command that runs case `index` alone, as the campaign did.
std::string strategy_replay_command(const StrategyReport& report, std::int64_t index);
// The command that runs a saved case file as the campaign judged it.
std::string strategy_file_command(const StrategyReport& report, const std::string& file);

// The mismatches by cause: "FAIL: ..." and each cause with its cases (bounded).
void print_strategy_mismatches(std::ostream& out, const StrategyReport& report);

std::string strategy_report_json(const StrategyReport& report);
std::string strategy_report_junit(const StrategyReport& report);

}  // namespace infonce::cli
