// `infonce-sim merge REPORT.json...`: the campaign of several shards' JSON
// reports (`check --shard I/N --format json` or `--report FILE.json`). With
// every shard present the result is the unsharded campaign's report, byte
// for byte in every format; with some, a report that merges further.
// Exit 0 if the merged campaign passed, 1 if it failed.
#include <fstream>
#include <ostream>
#include <sstream>
#include <string>

#include "base/error.hpp"
#include "cli/command.hpp"
#include "cli/tool_options.hpp"
#include "properties/campaign_report.hpp"

namespace infonce::cli {
namespace {
namespace po = boost::program_options;
namespace fs = std::filesystem;

constexpr std::uintmax_t kMaxReportBytes = std::uintmax_t{1} << 30;

properties::CampaignReport read_report(const std::string& path) {
  std::error_code error;
  if (fs::is_directory(path, error)) throw InputError(path + ": is a directory, expected a report");
  const auto size = fs::file_size(path, error);
  if (error) throw InputError(path + ": cannot read: " + error.message());
  if (size > kMaxReportBytes) throw InputError(path + ": larger than 1 GiB, not a report");
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in) throw InputError(path + ": cannot read");
  try {
    return properties::report_from_json(text.str());
  } catch (const InputError& e) {
    throw InputError(path + ": " + e.what());
  }
}

int run_merge(const CommandContext& context) {
  std::string format = "human";
  std::vector<std::string> report_files;
  po::options_description options("options");
  options.add_options()("format", po::value(&format)->value_name("human|json|junit"),
                        "what standard output gets (default human)")(
      "report", po::value(&report_files)->value_name("FILE"),
      "also write FILE: .json, .xml (JUnit), .svg or .html; repeatable");
  const auto values = parse_options_and_words(context, options, "reports", -1);
  if (!values) return kExitOk;
  if (!values->count("reports")) throw UsageError("merge: give the JSON reports to merge");
  const OutputFormat output = parse_format("merge", format);
  std::vector<ReportFile> files;
  for (const std::string& file : report_files) files.push_back(parse_report_file("merge", file));
  std::vector<properties::CampaignReport> reports;
  for (const std::string& path : (*values)["reports"].as<std::vector<std::string>>()) {
    reports.push_back(read_report(path));
  }
  properties::CampaignReport merged = properties::merge_reports(reports);
  merged.program = std::string(context.program);
  print_report(context.out, output, merged);
  for (const ReportFile& file : files) write_report_file(file, merged);
  return merged.passed() ? kExitOk : kExitCheckFailed;
}

const RegisterCommand kMerge{
    {"merge", "REPORT.json... [--format human|json|junit] [--report FILE]...",
     "merge the JSON reports of a sharded campaign into the unsharded campaign's report",
     run_merge}};

}  // namespace
}  // namespace infonce::cli
