#include "properties/strategy_grid.hpp"

#include <atomic>
#include <exception>
#include <mutex>
#include <thread>

namespace infonce::properties {
namespace {

// Cell k's share of the budget N over K cells: N / K, one more for the
// first N mod K.
std::int64_t share(const StrategyGridOptions& options, std::size_t cells, std::size_t k) {
  const auto count = static_cast<std::int64_t>(cells);
  return options.cases / count + (static_cast<std::int64_t>(k) < options.cases % count ? 1 : 0);
}

// The cells in order, over consecutive index ranges.
std::vector<StrategyGridCell> lay_out(const StrategyGridOptions& options) {
  std::vector<const StrategyFamily*> families = options.families;
  if (families.empty()) {
    for (const StrategyFamily& family : strategy_families()) families.push_back(&family);
  }
  std::vector<step::Strategy> points = options.points;
  if (points.empty()) {
    for (const step::Strategy& point : step::all_strategies()) points.push_back(point);
  }
  std::vector<StrategyGridCell> cells;
  for (const StrategyFamily* family : families) {
    for (const step::Strategy& point : points) {
      StrategyGridCell cell;
      cell.family = family;
      cell.point = point;
      cells.push_back(cell);
    }
  }
  std::int64_t next = 0;
  for (std::size_t k = 0; k < cells.size(); ++k) {
    cells[k].first_index = next;
    next += share(options, cells.size(), k);
  }
  return cells;
}

void tally_groups(const StrategyCaseResult& r, StrategyGridCell& out) {
  const bool judged = r.observation == StrategyObservation::confirmed ||
                      r.observation == StrategyObservation::no_counterexample ||
                      r.observation == StrategyObservation::mismatch;
  if (!judged) return;
  const auto encoders = static_cast<std::size_t>(r.prediction.verdict);
  ++out.encoders.predicted[encoders];
  if (r.observation == StrategyObservation::confirmed) ++out.encoders.shown[encoders];
  if (r.direct == DirectObservation::absent) return;
  const auto direct = static_cast<std::size_t>(r.direct_prediction.verdict);
  ++out.direct.predicted[direct];
  if (r.direct == DirectObservation::confirmed) ++out.direct.shown[direct];
}

// RapidCheck keeps its generator state in process-wide globals (as
// properties/campaign.cpp says): generation is serialised, checking is not.
std::mutex& generation_mutex() {
  static std::mutex mutex;
  return mutex;
}

void run_cell(const StrategyGridOptions& options, std::int64_t cases, StrategyGridCell& out) {
  StrategyCampaignOptions draws;
  draws.families = out.family->choice;
  draws.only = out.point;
  StrategyCampaignResult tallied;
  for (std::int64_t index = out.first_index; index < out.first_index + cases; ++index) {
    CaseSpec spec;
    Case c;
    {
      const std::lock_guard lock(generation_mutex());
      c = strategy_case(options.seed, index, options.limits, out.point, &spec, &draws);
    }
    const StrategyCaseResult r = check_strategy_case(c, {}, options.oracle);
    tally_strategy_case(index, c, r, tallied, &spec);
    tally_groups(r, out);
    out.with_replicas += c.mesh.world > c.mesh.dp ? 1 : 0;
  }
  out.cell = (tallied.*(out.family->cells))[strategy_index(out.point)];
}

}  // namespace

std::int64_t StrategyGridResult::cells_not_as_predicted() const {
  std::int64_t count = 0;
  for (const StrategyGridCell& cell : cells) count += cell.as_predicted() ? 0 : 1;
  return count;
}

StrategyGridResult run_strategy_grid(const StrategyGridOptions& options) {
  StrategyGridResult result;
  result.cells = lay_out(options);
  std::atomic<std::size_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  const auto work = [&] {
    for (std::size_t k = next++; k < result.cells.size(); k = next++) {
      try {
        run_cell(options, share(options, result.cells.size(), k), result.cells[k]);
      } catch (...) {
        const std::lock_guard lock(error_mutex);
        if (!error) error = std::current_exception();
        next = result.cells.size();
      }
    }
  };
  {
    std::vector<std::jthread> helpers;
    for (std::int32_t j = 1; j < options.jobs; ++j) helpers.emplace_back(work);
    work();
  }
  if (error) std::rethrow_exception(error);
  for (const StrategyGridCell& cell : result.cells) {
    result.cases += cell.cell.cases;
    result.oracle_judged += cell.cell.oracle_judged;
  }
  return result;
}

}  // namespace infonce::properties
