#include "sim/determinism.hpp"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "base/assert.hpp"
#include "base/error.hpp"

namespace infonce::sim {

std::uint64_t RunRecord::hash() const {
  std::uint64_t h = fnv1a64_u64(outputs.size());
  for (const auto& output : outputs) {
    h = fnv1a64_u64(output.size(), h);
    h = fnv1a64(output, h);
  }
  h = fnv1a64_u64(error.has_value() ? 1 : 0, h);
  if (error) h = fnv1a64(std::as_bytes(std::span(error->data(), error->size())), h);
  return h;
}

RunRecord run_recorded(const SimulationOptions& options, const RecordingProgram& program) {
  RunRecord record;
  record.outputs.resize(static_cast<std::size_t>(options.world_size));
  try {
    run_fibers(options, [&record, &program](Communicator& comm) {
      record.outputs[static_cast<std::size_t>(comm.world_rank())] = program(comm);
    });
  } catch (const SimulationError& e) {
    record.outputs.clear();
    record.error = e.what();
  }
  return record;
}

namespace {

std::string label(const Schedule& schedule, int repeat) {
  const std::string kind = schedule.kind == ScheduleKind::fifo
                               ? "fifo"
                               : "random(" + std::to_string(schedule.seed) + ")";
  return kind + "#" + std::to_string(repeat);
}

std::string hex_byte(std::byte b) {
  char text[8];
  std::snprintf(text, sizeof text, "0x%02x", static_cast<unsigned>(b));
  return text;
}

// Where `run` first differs from `reference` (they are known to differ).
std::string divergence(const RunRecord& reference, const std::string& reference_label,
                       const RunRecord& run, const std::string& run_label) {
  const std::string head = run_label + " differs from " + reference_label + ": ";
  if (reference.error != run.error) {
    return head + "error " + (run.error ? "\"" + *run.error + "\"" : "none") + " vs " +
           (reference.error ? "\"" + *reference.error + "\"" : "none");
  }
  for (std::size_t rank = 0; rank < reference.outputs.size(); ++rank) {
    const auto& a = run.outputs[rank];
    const auto& b = reference.outputs[rank];
    const auto [at_a, at_b] = std::ranges::mismatch(a, b);
    const auto offset = static_cast<std::size_t>(at_a - a.begin());
    if (at_a != a.end() && at_b != b.end()) {
      return head + "world rank " + std::to_string(rank) + " output byte " +
             std::to_string(offset) + " is " + hex_byte(*at_a) + " vs " + hex_byte(*at_b);
    }
    if (a.size() != b.size()) {
      return head + "world rank " + std::to_string(rank) + " output has " +
             std::to_string(a.size()) + " bytes vs " + std::to_string(b.size());
    }
  }
  return head + "hash only";
}

}  // namespace

DeterminismReport check_determinism(const SimulationOptions& options,
                                    const RecordingProgram& program,
                                    std::span<const Schedule> schedules) {
  if (schedules.empty()) throw InputError("check_determinism: schedules must not be empty");
  DeterminismReport report;
  std::optional<RunRecord> reference;
  for (const Schedule& schedule : schedules) {
    for (int repeat = 0; repeat < 2; ++repeat) {
      SimulationOptions run_options = options;
      run_options.schedule = schedule;
      RunRecord record = run_recorded(run_options, program);
      report.runs.push_back(label(schedule, repeat));
      report.hashes.push_back(record.hash());
      if (!reference) {
        reference = std::move(record);
        continue;
      }
      if (report.deterministic && report.hashes.back() != report.hashes.front()) {
        report.deterministic = false;
        report.first_divergence =
            divergence(*reference, report.runs.front(), record, report.runs.back());
      }
    }
  }
  return report;
}

std::vector<Schedule> default_schedules() {
  return {Schedule{ScheduleKind::fifo, 0}, Schedule{ScheduleKind::random, 1},
          Schedule{ScheduleKind::random, 2}, Schedule{ScheduleKind::random, 3}};
}

}  // namespace infonce::sim
