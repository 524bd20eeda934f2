// Option values shared by the campaign commands (check, replay, merge,
// corpus): each parser takes the text a user typed and either returns the
// value or throws UsageError with one line naming the command and option.
#pragma once

#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/program_options.hpp>

#include "casefile/case.hpp"
#include "cli/command.hpp"
#include "properties/campaign.hpp"
#include "properties/campaign_report.hpp"
#include "properties/sut_step.hpp"

namespace infonce::cli {

struct SeedChoice {
  std::uint64_t seed = 1;
  std::string source;  // "" for a number; "commit <hex>" for a commit
};

// "123" (decimal), "0x1f" (hex number), "3f2a9c1" or "commit:3f2a9c1" (a git
// commit, 7 to 64 hex digits: its first 7 name the seed, so a short and a
// full hash give the same campaign), "git" (`git rev-parse HEAD`).
SeedChoice parse_seed(std::string_view command, std::string_view text);
// The seed of a commit hash (7 to 64 hex digits).
std::uint64_t seed_of_commit(std::string_view hex);

// A positive count within [1, max]: "--cases 0" is an error.
std::int64_t parse_count(std::string_view command, std::string_view option, std::string_view text,
                         std::int64_t max);
// "10m", "90s", "1h30m", "500ms": whole numbers with units; > 0, at most 30 days.
double parse_duration_seconds(std::string_view command, std::string_view text);
// "i/N", 0 <= i < N.
properties::ShardSpec parse_shard(std::string_view command, std::string_view text);
// A number of threads, or "auto" (the hardware's).
std::int32_t parse_jobs(std::string_view command, std::string_view text);
properties::GeneratorLimits parse_limits(std::string_view command, std::string_view text);
// nullptr for "" (no mutant); UsageError for an unknown name.
const step::Mutant* parse_mutant(std::string_view command, std::string_view text);
// --oracle every|sampled|off (properties::OracleMode).
properties::OracleMode parse_oracle(std::string_view command, std::string_view text);

enum class OutputFormat { human, json, junit };
OutputFormat parse_format(std::string_view command, std::string_view text);

// A report file named on the command line; its kind comes from the extension.
enum class ReportKind { json, junit, svg, html };
struct ReportFile {
  std::filesystem::path path;
  ReportKind kind;
};
// Checks, before any work is done, that the file can be written.
ReportFile parse_report_file(std::string_view command, const std::string& text);
// Writes the rendering atomically (a temporary file renamed over it).
void write_report_file(const ReportFile& file, const properties::CampaignReport& report);
void write_text_file_atomically(const std::filesystem::path& path, const std::string& text);

// Checks that `dir` exists as a directory or could be created.
void check_writable_dir(std::string_view command, std::string_view option,
                        const std::filesystem::path& dir);

// Saves a case (with its `found` record) under `dir` as case-<hash>.json,
// the hash over the case and the mutant it was found with (not the seed or
// index): the same finding always gets the same file, and an existing file
// is never overwritten by a different one (which gets a -1, -2 ... suffix).
std::filesystem::path save_corpus_case(const Case& c, const std::filesystem::path& dir);

using properties::kDefaultCorpusFoundDir;

// Writes a campaign report to standard output in the chosen format.
void print_report(std::ostream& out, OutputFormat format, const properties::CampaignReport& report);

// --sut CMD [--sut-timeout S]: an external system under test (docs/sut-protocol.md).
struct SutChoice {
  std::string command;
  double timeout_seconds = 60;
  std::string timeout_text;  // as given; "" for the default
};
// --sut, --sut-timeout and (generating commands only) --restrict.
void add_sut_options(boost::program_options::options_description& options,
                     bool with_restrict = true);
SutChoice parse_sut(std::string_view command, const std::optional<std::string>& sut,
                    const std::optional<std::string>& timeout);
// --restrict AXIS=VALUE: narrows what is generated for the SUT beyond its
// handshake (hard_negatives=false, use_batch=true|false, mask_fake_negative=false,
// include_qq=false, include_dd=false, accumulation_normalize=true|false,
// max_world=N, max_replicas=N, min_dim=N). A value the handshake excludes is a UsageError.
void apply_restrict_option(std::string_view command, const std::string& text,
                           properties::Restriction& restriction);
// Starts `jobs` SUT processes and reads their handshakes (InputError: exit 2).
std::unique_ptr<properties::SutStep> start_sut(const SutChoice& sut, std::int32_t jobs);

// A campaign as `check` and `check-mpi` settle it from their options.
struct CampaignSettings {
  properties::CampaignOptions campaign;
  properties::CampaignReport report;  // the fields known before running
  std::optional<double> time_budget_seconds;
  OutputFormat format = OutputFormat::human;
  std::vector<ReportFile> reports;
  std::string corpus_dir = kDefaultCorpusFoundDir;
  bool save_corpus = true;
};

// What a campaign does with its failure: the shrunk case's `found` record
// (mutant, property, seed, index, limits) and, if asked, its corpus file.
void record_failure(const CampaignSettings& s, properties::CampaignReport& report);

}  // namespace infonce::cli
