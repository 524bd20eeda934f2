// The human rendering of a campaign report (what `check` prints by default).
#include <cstdio>
#include <ostream>

#include "properties/campaign_report.hpp"

namespace infonce::properties {
namespace {

std::string shard_text(const ShardSet& shards) {
  std::string text;
  for (const std::int64_t i : shards.indices) {
    if (!text.empty()) text += ',';
    text += std::to_string(i);
  }
  return text + "/" + std::to_string(shards.count);
}

// The cases the SUT declined, by reason (a few reasons; they are discards, not failures).
void write_declined(std::ostream& out, const CampaignResult& r) {
  if (r.declined.empty()) return;
  std::int64_t total = 0;
  for (const auto& [reason, count] : r.declined) total += count;
  out << "  declined by the SUT: " << total << (total == 1 ? " case" : " cases")
      << " (discarded, not failures)\n";
  constexpr std::size_t kShown = 8;
  std::size_t shown = 0;
  for (const auto& [reason, count] : r.declined) {
    if (shown++ == kShown) {
      out << "    ... " << r.declined.size() - kShown << " more reasons\n";
      break;
    }
    out << "    " << count << " x " << reason << "\n";
  }
}

void write_header(std::ostream& out, const CampaignReport& report) {
  const CampaignResult& r = report.result;
  out << "check: seed " << report.seed << ", " << r.cases_run << " cases (" << r.discarded
      << " discarded), mutant " << (report.mutant.empty() ? "none" : report.mutant) << "\n";
  write_declined(out, r);
  if (!report.seed_source.empty()) out << "  seed from " << report.seed_source << "\n";
  if (report.limits != "default") out << "  limits " << report.limits << "\n";
  if (!report.sut_command.empty()) {
    out << "  sut: " << report.sut_name << " (--sut " << shell_word(report.sut_command) << ")\n";
    for (const std::string& axis : report.restricted_axes) {
      out << "    restricted: " << axis << "\n";
    }
  }
  if (!report.shards.whole()) {
    out << "  shard " << shard_text(report.shards) << " (block b of " << kBlockCases
        << " cases when b % " << report.shards.count << " is the shard): covered";
    constexpr std::size_t kShown = 4;
    for (std::size_t i = 0; i < r.covered.size() && i < kShown; ++i) {
      out << " [" << r.covered[i].begin << ", " << r.covered[i].end << ")";
    }
    if (r.covered.size() > kShown) out << " ...";
    out << "\n";
  }
  if (r.stopped_by == StopReason::interrupted) {
    out << "  stopped by an interrupt after " << r.cases_run << " cases\n";
  }
  if (r.stopped_by == StopReason::time) {
    out << "  stopped by the time budget (" << report.time_budget << ") after " << r.cases_run
        << " cases\n";
  }
  if (report.self_check) {
    out << "  self-check: " << r.self_checked << (r.self_checked == 1 ? " case" : " cases")
        << " rerun (generation, reference, FIFO with and without shared losses, "
        << "another schedule): "
        << (r.divergence ? "DIVERGED at case " + std::to_string(r.divergence->case_index)
                         : std::string("every bit agreed"))
        << "\n";
    if (r.divergence) out << "    " << r.divergence->detail << "\n";
  }
  for (const auto& [property, count] : r.property_checks) {
    out << "  " << property << ": checked " << count << " times\n";
  }
  for (const auto& [reason, count] : r.discards_by_reason) {
    out << "  discarded " << count << " times: " << reason << "\n";
  }
}

void write_coverage(std::ostream& out, const Coverage& coverage) {
  out << "coverage (cases per axis value):\n";
  for (const auto& [axis, values] : coverage) {
    out << "  " << axis << ":";
    for (const auto& [value, count] : coverage_in_reading_order(values))
      out << " " << value << "=" << count;
    out << "\n";
  }
}

}  // namespace

void write_failure_text(std::ostream& out, const CampaignReport& report) {
  const CampaignFailure& failure = *report.result.failure;
  out << "FAILED at case " << failure.case_index << " (shrunk in " << failure.shrink_steps
      << " steps)\n  original: " << describe(failure.original)
      << "\n  shrunk:   " << describe(failure.shrunk) << "\n";
  for (const auto& f : failure.failures) out << "  " << f.property << ": " << f.detail << "\n";
  if (!report.saved_case.empty()) out << "  saved:    " << report.saved_case << "\n";
  const auto commands = reproduce_commands(report);
  for (std::size_t i = 0; i < commands.size(); ++i) {
    out << (i == 0 ? "  reproduce: " : "         or: ") << commands[i] << "\n";
  }
}

void write_report_text(std::ostream& out, const CampaignReport& report) {
  const CampaignResult& r = report.result;
  write_header(out, report);
  write_coverage(out, r.coverage);
  if (r.failure) {
    write_failure_text(out, report);
    return;
  }
  if (r.divergence) {
    out << "SELF-CHECK FAILED: case " << r.divergence->case_index << " did not rerun bit for bit\n";
    return;
  }
  if (const auto discards = report.discard_budget_failure()) {
    out << *discards << "\n";
    return;
  }
  char worst[128];
  std::snprintf(worst, sizeof worst, "worst gradient rel_err: float64 %.3e, float32 %.3e\n",
                r.worst_rel_err, r.worst_rel_err_float);
  out << "PASSED: every property held on every case\n" << worst;
}

}  // namespace infonce::properties
