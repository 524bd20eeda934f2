#include "cli/strategy_grid_report.hpp"

#include <algorithm>
#include <cstdio>

#include "properties/campaign_report.hpp"

namespace infonce::cli {
namespace {

using properties::StrategyGridCell;

// "correct/ratio/none" counts, e.g. "3989/10070/0".
std::string counts(const std::array<std::int64_t, 3>& by_verdict) {
  return std::to_string(by_verdict[0]) + "/" + std::to_string(by_verdict[1]) + "/" +
         std::to_string(by_verdict[2]);
}

// The command that runs case `index` of a cell alone, as the grid ran it.
std::string case_command(const StrategyGridReport& r, const StrategyGridCell& cell,
                         std::int64_t index) {
  std::string command = properties::shell_word(r.program) + " check --strategies " +
                        step::name_of(cell.point) + " --family " + std::string(cell.family->key) +
                        " --seed " + std::to_string(r.options.seed) + " --case-index " +
                        std::to_string(index);
  if (r.limits != "default") command += " --limits " + r.limits;
  if (!r.options.oracle) command += " --oracle off";
  return command;
}

void print_header(std::ostream& out, const StrategyGridReport& r) {
  const properties::StrategyGridResult& result = r.result;
  std::int64_t least = result.cases, most = 0;
  for (const StrategyGridCell& cell : result.cells) {
    least = std::min(least, cell.cell.cases);
    most = std::max(most, cell.cell.cases);
  }
  out << "strategy grid: seed " << r.options.seed << ", " << result.cases << " cases over "
      << result.cells.size() << " cells (family x point), " << least
      << (least == most ? "" : " to " + std::to_string(most)) << " cases per cell, limits "
      << r.limits << "; each cell's cases at its point and family alone\n";
  out << "oracle: "
      << (r.options.oracle
              ? "judged the reference of " + std::to_string(result.oracle_judged) + " cases"
              : std::string("off (--oracle off); the reference is not judged"))
      << "\n";
}

void print_rows(std::ostream& out, const StrategyGridReport& r) {
  char line[320];
  std::snprintf(line, sizeof line, "%-8s %-44s %7s %7s %7s %16s %16s %16s %16s %8s  %s\n", "family",
                "point", "cases", "W>P", "judged", "encoders c/r/n", "shown", "direct c/r/n",
                "shown", "mismatch", "result");
  out << line;
  for (const StrategyGridCell& cell : r.result.cells) {
    const auto n = [](std::int64_t v) { return static_cast<long long>(v); };
    std::snprintf(line, sizeof line, "%-8s %-44s %7lld %7lld %7lld %16s %16s %16s %16s %8lld  %s\n",
                  std::string(cell.family->key).c_str(), step::name_of(cell.point).c_str(),
                  n(cell.cell.cases), n(cell.with_replicas), n(cell.judged()),
                  counts(cell.encoders.predicted).c_str(), counts(cell.encoders.shown).c_str(),
                  counts(cell.direct.predicted).c_str(), counts(cell.direct.shown).c_str(),
                  n(cell.cell.mismatched),
                  cell.as_predicted() ? "as predicted" : "NOT AS PREDICTED");
    out << line;
  }
}

void print_legend(std::ostream& out) {
  out << "W>P: the cases with replicas, where a /world point's gather differs from its dp "
         "twin's\n"
      << "c/r/n predicted: over the cell's judged cases, how many the prediction (prediction/, for "
         "each case's own P, W and batches) calls correct / an exact ratio r != 1 / no single "
         "ratio; shown: of those, the cases whose gradient is the reference, r x the reference, "
         "or no multiple of it (a counterexample; a no-single-ratio case whose gradient happens "
         "to be a multiple is not shown, nor failed)\n"
      << "direct: the cases with direct parameters (a learnable 1/T on every other InfoNCE and "
         "NT-Xent case; CLIP's log logit scale, and bias); a no-single-ratio direct case is one "
         "number, counted but not judged\n"
      << "judged: the cases less those the reference rejects and the float32 local-loss "
         "near ties; a cell is as predicted when no case differs and some case was judged\n";
}

void print_failures(std::ostream& out, const StrategyGridReport& r) {
  const std::int64_t failed = r.result.cells_not_as_predicted();
  if (failed == 0) {
    out << "PASS: every one of the " << r.result.cells.size() << " cells is as predicted ("
        << r.result.cases << " cases)\n";
    return;
  }
  out << "FAIL: " << failed << " of " << r.result.cells.size()
      << " cells are not as predicted; each one's first differing case:\n";
  for (const StrategyGridCell& cell : r.result.cells) {
    if (cell.as_predicted()) continue;
    out << "  " << cell.family->key << " " << step::name_of(cell.point) << ": ";
    if (!cell.cell.first_mismatch_index) {
      out << "no case judged (" << cell.cell.first_discard << ")\n";
      continue;
    }
    out << cell.cell.mismatched << " cases differ; " << cell.cell.first_mismatch
        << "\n    reproduce: " << case_command(r, cell, *cell.cell.first_mismatch_index) << "\n";
  }
}

}  // namespace

void print_strategy_grid(std::ostream& out, const StrategyGridReport& report) {
  print_header(out, report);
  print_rows(out, report);
  print_legend(out);
  print_failures(out, report);
}

}  // namespace infonce::cli
