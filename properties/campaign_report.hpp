// A campaign's report: what was asked (seed, budget, shard, mutant), what
// happened (the CampaignResult), and where its failure went (the saved case
// file, the commands that reproduce it). One model, several renderings:
// human text, JSON (`infonce-campaign/1`, which `merge` reads back), JUnit
// XML, and an SVG/HTML picture. Every rendering is a function of the report
// alone: no clock, no host name, no thread count.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "properties/campaign.hpp"

namespace infonce::properties {

inline constexpr std::string_view kReportFormat = "infonce-campaign/1";
// Where `check` and `replay` save shrunk failures unless told otherwise.
inline constexpr const char* kDefaultCorpusFoundDir = "corpus/found";

// The shards a report covers: {1, [0]} is the whole seed space.
struct ShardSet {
  std::int64_t count = 1;
  std::vector<std::int64_t> indices{0};
  bool whole() const { return count == 1; }
  bool operator==(const ShardSet&) const = default;
};

// A campaign that discards more than this share of its cases fails: a
// reference that rejects valid input (or a generator that drifts into
// undefined cases) would otherwise leave every property unjudged behind
// discards and still pass (issue 30: one slip raised the share from 2% to
// 23%). Judged from kDiscardBudgetMinCases cases on, where 2% cannot
// reach 10% by chance.
inline constexpr double kMaxDiscardShare = 0.10;
inline constexpr std::int64_t kDiscardBudgetMinCases = 100;

// The commonest discard kind of a tally and its count ({"", 0}: none); ties
// go to the first kind in name order.
std::pair<std::string, std::int64_t> commonest_discard(const Tally& tally);

struct CampaignReport {
  std::uint64_t seed = 1;
  std::string seed_source;  // how the seed was given: "" (a number) or "commit <hex>"
  std::string mutant;       // "": the correct system
  std::string limits = "default";
  std::optional<std::int64_t> case_budget;  // nullopt: none
  std::string time_budget;                  // "": none; else as given, e.g. "10m"
  ShardSet shards;
  bool self_check = false;
  CampaignResult result;
  std::string saved_case;  // the failure's case file ("" if none was saved)
  // The command the reproduce lines start with: how the CLI was invoked
  // (argv[0], e.g. build/infonce-sim), so they run as printed. Not stored
  // in the JSON report's fields; a merge prints its own invocation's.
  std::string program = "infonce-sim";
  // check --sut: the command as given, the name its handshake gave, the
  // --sut-timeout as given ("": the default) and the restricted axes.
  std::string sut_command;
  std::string sut_name;
  std::string sut_timeout;
  std::vector<std::string> restricted_axes;
  std::vector<std::string> restrict_options;  // --restrict AXIS=VALUE, as given

  // One line when the discard share exceeds kMaxDiscardShare (naming the
  // share and the commonest reason); nullopt within the budget.
  std::optional<std::string> discard_budget_failure() const;
  bool passed() const { return !result.failure && !result.divergence && !discard_budget_failure(); }
};

// One axis's coverage in reading order: numbers (and buckets such as "3-4")
// by their first number, so 1, 2, 3-4, ..., 17-32; then words, by name.
std::vector<std::pair<std::string, std::int64_t>> coverage_in_reading_order(
    const Coverage::mapped_type& values);

// A word for a POSIX shell: quoted unless it is plain.
std::string shell_word(std::string_view text);

// The commands that reproduce the report's failure.
std::vector<std::string> reproduce_commands(const CampaignReport& report);

// --- JSON (infonce-campaign/1). Reading throws InputError naming the key.
std::string report_to_json(const CampaignReport& report);
CampaignReport report_from_json(std::string_view text);

// The report of the shards together: the reports must come from the same
// campaign (seed, mutant, limits, budget, self-check, shard count) and cover
// different shards. When they cover every shard, the result is the unsharded
// report, field for field. Throws InputError on a mismatch.
CampaignReport merge_reports(const std::vector<CampaignReport>& reports);

// --- renderings
void write_report_text(std::ostream& out, const CampaignReport& report);
void write_failure_text(std::ostream& out, const CampaignReport& report);
void write_report_junit(std::ostream& out, const CampaignReport& report);
void write_report_svg(std::ostream& out, const CampaignReport& report);
void write_report_html(std::ostream& out, const CampaignReport& report);

// XML attribute escaping (also replaces characters XML 1.0 forbids by '?'),
// and the same for element text, where quotes stay as they are.
std::string xml_escape(std::string_view text);
std::string xml_text(std::string_view text);

// CaseSpec <-> JSON (for the report's failure).
std::string spec_to_json_text(const CaseSpec& spec);

}  // namespace infonce::properties
