// Malformed command lines over the whole campaign tool (check, replay,
// merge, corpus replay/pick, run): every row must exit 2 with nothing on
// stdout and exactly one line on stderr, "infonce-sim: error: ...", naming
// the option or file. Nothing may crash (the sanitizer build runs this).
//
// Rows name the files they need with @tokens (a valid case, shard reports,
// a directory...), made on first use, so listing the tests costs nothing.
#include <filesystem>
#include <fstream>
#include <map>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/casefile/bad_case_table.hpp"
#include "tests/cli/cli_runner.hpp"

namespace infonce::tool_test {
namespace {

namespace fs = std::filesystem;
using cli_test::CliResult;
using cli_test::fresh_work_dir;
using cli_test::lines_of;
using cli_test::run_infonce_sim;
using cli_test::write_text_file;

struct Misuse {
  std::string name;
  std::vector<std::string> args;  // @tokens are replaced by prepared paths
  std::string message_part;       // the one stderr line contains this
};

void PrintTo(const Misuse& misuse, std::ostream* out) {
  *out << misuse.name;
}

// Files the rows refer to, made once per process.
class Fixtures {
 public:
  std::string path(const std::string& token) {
    if (const auto it = made_.find(token); it != made_.end()) return it->second;
    const std::string made = make(token);
    made_[token] = made;
    return made;
  }

 private:
  std::string report(const std::string& name, std::vector<std::string> args) {
    const fs::path file = dir() / (name + ".json");
    args.insert(args.begin(), "check");
    args.insert(args.end(), {"--no-corpus", "--report", file.string()});
    run_infonce_sim(args);
    return file.string();
  }

  std::string make(const std::string& token) {
    if (token == "@dir") return dir().string();
    if (token == "@missing") return (dir() / "no-such-file.json").string();
    if (token == "@missing_dir") return (dir() / "no-such-dir").string();
    if (token == "@empty_file") return write_text_file(dir() / "empty.json", "").string();
    if (token == "@not_json") return write_text_file(dir() / "notes.txt", "notes").string();
    if (token == "@valid_case") {
      return write_text_file(dir() / "valid.json", std::string(infonce::testing::kValidCaseText))
          .string();
    }
    if (token == "@case_unknown_mutant") {
      std::string text(infonce::testing::kValidCaseText);
      text.insert(text.size() - 1,
                  R"(,"found":{"mutant":"no-such-mutant","property":"p","seed":1,"case_index":0})");
      return write_text_file(dir() / "unknown-mutant.json", text).string();
    }
    if (token == "@empty_dir") {
      fs::create_directories(dir() / "empty-dir");
      return (dir() / "empty-dir").string();
    }
    if (token == "@dir_named_json") {
      fs::create_directories(dir() / "report.json");
      return (dir() / "report.json").string();
    }
    if (token == "@file_as_dir_report") return path("@empty_file") + "/report.json";
    if (token == "@shard0")
      return report("shard0", {"--seed", "1", "--cases", "64", "--shard", "0/2"});
    if (token == "@shard1")
      return report("shard1", {"--seed", "1", "--cases", "64", "--shard", "1/2"});
    if (token == "@shard1_seed2") {
      return report("shard1-seed2", {"--seed", "2", "--cases", "64", "--shard", "1/2"});
    }
    if (token == "@whole") return report("whole", {"--seed", "1", "--cases", "64"});
    ADD_FAILURE() << "unknown token " << token;
    return token;
  }

  static fs::path dir() {
    static const fs::path made = fresh_work_dir("misuse-fixtures");
    return made;
  }

  std::map<std::string, std::string> made_;
};

Fixtures& fixtures() {
  static Fixtures instance;
  return instance;
}

std::vector<Misuse> misuses() {
  return {
      // --- check: numbers and budgets
      {"check_cases_zero", {"check", "--cases", "0"}, "check: --cases must be at least 1"},
      {"check_cases_negative", {"check", "--cases=-5"}, "check: --cases must be a whole number"},
      {"check_cases_word",
       {"check", "--cases", "many"},
       "check: --cases must be a whole number, not 'many'"},
      {"check_cases_exponent",
       {"check", "--cases", "1e3"},
       "check: --cases must be a whole number"},
      {"check_cases_empty",
       {"check", "--cases", ""},
       "check: --cases must be a whole number, not ''"},
      {"check_cases_beyond_limit",
       {"check", "--cases", "99999999999999999999"},
       "check: --cases must"},
      {"check_cases_twice",
       {"check", "--cases", "1", "--cases", "2"},
       "cannot be specified more than once"},
      {"check_time_budget_bad_unit",
       {"check", "--time-budget", "10x"},
       "check: --time-budget must be a duration like 10m"},
      {"check_time_budget_no_unit",
       {"check", "--time-budget", "10"},
       "check: --time-budget must be a duration"},
      {"check_time_budget_zero",
       {"check", "--time-budget", "0s"},
       "check: --time-budget must be longer than 0"},
      {"check_time_budget_too_long",
       {"check", "--time-budget", "1000h"},
       "check: --time-budget must be at most 30 days"},
      {"check_time_budget_empty",
       {"check", "--time-budget", ""},
       "check: --time-budget must be a duration"},
      {"check_time_budget_fraction",
       {"check", "--time-budget", "1.5m"},
       "check: --time-budget must be a duration"},
      {"check_jobs_zero",
       {"check", "--jobs", "0"},
       "check: --jobs must be a number of threads from 1 to 256"},
      {"check_jobs_word", {"check", "--jobs", "many"}, "check: --jobs must be"},
      {"check_jobs_too_many", {"check", "--jobs", "100000"}, "check: --jobs must be"},
      {"check_shard_index_equals_count",
       {"check", "--shard", "2/2"},
       "check: --shard must be I/N with 0 <= I < N"},
      {"check_shard_word", {"check", "--shard", "x"}, "check: --shard must be I/N"},
      {"check_shard_zero_count", {"check", "--shard", "0/0"}, "check: --shard must be I/N"},
      {"check_shard_no_slash", {"check", "--shard", "1"}, "check: --shard must be I/N"},
      {"check_shard_negative", {"check", "--shard=-1/2"}, "check: --shard must be I/N"},
      {"check_shard_too_many",
       {"check", "--shard", "0/9999999"},
       "check: --shard N must be at most"},
      // --- check: seeds
      {"check_seed_word",
       {"check", "--seed", "banana"},
       "check: --seed must be a number, 0x<hex>, a commit hash"},
      {"check_seed_short_hex", {"check", "--seed", "abc12"}, "check: --seed must be a number"},
      {"check_seed_beyond_64_bits",
       {"check", "--seed", "18446744073709551616"},
       "is beyond 2^64 - 1"},
      {"check_seed_negative", {"check", "--seed=-1"}, "check: --seed must be a number"},
      {"check_seed_empty_hex",
       {"check", "--seed", "0x"},
       "check: --seed 0x... must be 1 to 16 hex digits"},
      {"check_seed_long_hex",
       {"check", "--seed", "0x11112222333344445"},
       "check: --seed 0x... must be"},
      {"check_seed_bad_commit",
       {"check", "--seed", "commit:xyz"},
       "check: --seed commit:HASH needs 7 to 64 hex digits"},
      {"check_seed_empty", {"check", "--seed", ""}, "check: --seed must be a number"},
      // --- check: choices and files
      {"check_profile_unknown",
       {"check", "--profile", "nightly"},
       "check: --profile must be 'ci' or 'explore'"},
      {"check_profile_ci_with_time_budget",
       {"check", "--profile", "ci", "--time-budget", "1m"},
       "check: --time-budget cannot be used with --profile ci"},
      {"check_format_unknown",
       {"check", "--format", "xml"},
       "check: --format must be 'human', 'json' or 'junit', not 'xml'"},
      {"check_report_extension",
       {"check", "--report", "out.txt"},
       "check: --report 'out.txt' must end in .json, .xml (JUnit), .svg or .html"},
      {"check_report_missing_dir", {"check", "--report", "@missing_dir/r.json"}, "check: --report"},
      {"check_report_under_a_file", {"check", "--report", "@file_as_dir_report"}, ": no directory"},
      {"check_report_is_directory", {"check", "--report", "@dir_named_json"}, "is a directory"},
      {"check_mutant_unknown",
       {"check", "--mutant", "nope"},
       "check: --mutant 'nope' is unknown (see `infonce-sim mutants`)"},
      {"check_limits_unknown",
       {"check", "--limits", "huge"},
       "check: --limits must be 'default' or 'typical', not 'huge'"},
      {"check_before_after_json",
       {"check", "--before-after", "--format", "json"},
       "check: --before-after needs --format human"},
      {"check_corpus_dir_under_a_file",
       {"check", "--corpus-dir", "@empty_file/found"},
       "is not a directory"},
      {"check_corpus_dir_empty",
       {"check", "--corpus-dir", ""},
       "check: --corpus-dir must not be empty"},
      {"check_no_corpus_with_dir",
       {"check", "--no-corpus", "--corpus-dir", "x"},
       "check: --no-corpus and --corpus-dir contradict"},
      {"check_unknown_option", {"check", "--bogus"}, "check: unrecognised option '--bogus'"},
      {"check_abbreviated_option", {"check", "--cas", "5"}, "check: unrecognised option '--cas'"},
      {"check_stray_word", {"check", "extra"}, "check: too many positional options"},
      {"check_seed_without_value",
       {"check", "--seed"},
       "the required argument for option '--seed' is missing"},
      // --- replay
      {"replay_nothing",
       {"replay"},
       "replay: give a case FILE, or both --seed S and --case-index I"},
      {"replay_seed_only", {"replay", "--seed", "1"}, "replay: give a case FILE, or both"},
      {"replay_index_word",
       {"replay", "--seed", "1", "--case-index", "x"},
       "replay: --case-index must be a whole number >= 0, not 'x'"},
      {"replay_index_negative",
       {"replay", "--seed", "1", "--case-index=-1"},
       "replay: --case-index must be"},
      {"replay_index_huge",
       {"replay", "--seed", "1", "--case-index", "99999999999999999999"},
       "replay: --case-index must be"},
      {"replay_seed_word",
       {"replay", "--seed", "x", "--case-index", "1"},
       "replay: --seed must be"},
      {"replay_unknown_mutant",
       {"replay", "--seed", "1", "--case-index", "0", "--mutant", "nope"},
       "replay: --mutant 'nope' is unknown"},
      {"replay_limits_unknown",
       {"replay", "--seed", "1", "--case-index", "0", "--limits", "x"},
       "replay: --limits must be"},
      {"replay_missing_file", {"replay", "@missing"}, "no-such-file.json: cannot read"},
      {"replay_empty_file", {"replay", "@empty_file"}, "empty.json: (top level): invalid JSON"},
      {"replay_directory", {"replay", "@dir"}, "is a directory, expected a case file"},
      {"replay_file_and_seed",
       {"replay", "@valid_case", "--seed", "1"},
       "replay: a case FILE takes only --mutant"},
      {"replay_two_files",
       {"replay", "@valid_case", "@valid_case"},
       "replay: too many positional options"},
      {"replay_file_unknown_mutant",
       {"replay", "@valid_case", "--mutant", "nope"},
       "replay: --mutant 'nope' is unknown"},
      {"replay_found_unknown_mutant",
       {"replay", "@case_unknown_mutant"},
       "found.mutant: 'no-such-mutant' is not a known mutant"},
      {"replay_no_corpus_with_dir",
       {"replay", "--seed", "1", "--case-index", "0", "--no-corpus", "--corpus-dir", "x"},
       "replay: --no-corpus and --corpus-dir contradict"},
      // --- merge
      {"merge_nothing", {"merge"}, "merge: give the JSON reports to merge"},
      {"merge_missing_file", {"merge", "@missing"}, "no-such-file.json: cannot read"},
      {"merge_directory", {"merge", "@dir"}, "is a directory, expected a report"},
      {"merge_empty_file", {"merge", "@empty_file"}, "empty.json: (top level): invalid JSON"},
      {"merge_a_case_file",
       {"merge", "@valid_case"},
       "valid.json: format: expected \"infonce-campaign/1\""},
      {"merge_different_seeds",
       {"merge", "@shard0", "@shard1_seed2"},
       "merge: the reports come from different campaigns (seed differs)"},
      {"merge_same_shard_twice",
       {"merge", "@shard0", "@shard0"},
       "merge: shard 0/2 is in two reports"},
      {"merge_whole_with_a_shard",
       {"merge", "@whole", "@shard1"},
       "a report of the whole seed space (no --shard) merges with nothing"},
      {"merge_format_unknown",
       {"merge", "@shard0", "@shard1", "--format", "pdf"},
       "merge: --format must be"},
      {"merge_report_extension",
       {"merge", "@shard0", "--report", "x.pdf"},
       "merge: --report 'x.pdf' must end in"},
      // --- corpus
      {"corpus_missing_dir", {"corpus", "replay", "@missing_dir"}, "corpus replay: "},
      {"corpus_is_a_file", {"corpus", "replay", "@valid_case"}, ": not a directory"},
      {"corpus_without_case_files", {"corpus", "replay", "@empty_dir"}, ": no case file found"},
      {"corpus_two_dirs",
       {"corpus", "replay", "@dir", "@dir"},
       "corpus replay: too many positional options"},
      {"corpus_unknown_option",
       {"corpus", "replay", "--jobs", "2"},
       "corpus replay: unrecognised option '--jobs'"},
      {"corpus_unknown_subcommand", {"corpus", "rerun"}, "unknown command 'corpus' (did you mean"},
      {"corpus_pick_without_out",
       {"corpus", "pick", "--cases", "10"},
       "corpus pick: missing --out DIR"},
      {"corpus_pick_cases_zero",
       {"corpus", "pick", "--cases", "0", "--out", "x"},
       "corpus pick: --cases must be at least 1"},
      {"corpus_pick_out_under_a_file",
       {"corpus", "pick", "--cases", "5", "--out", "@empty_file/x"},
       "is not a directory"},
      // --- run (another command's options, same rules)
      {"run_schedule_seed_word",
       {"run", "--case", "@valid_case", "--schedule-seed", "abc"},
       "--schedule-seed"},
      {"run_unknown_mutant", {"run", "--case", "@valid_case", "--mutant", "nope"}, "nope"},
      {"run_missing_case", {"run", "--case", "@missing"}, "no-such-file.json"},
  };
}

std::vector<std::string> resolved(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (const std::string& arg : args) {
    std::string value = arg;
    for (const std::string token :
         {"@missing_dir", "@empty_file", "@dir_named_json", "@file_as_dir_report",
          "@case_unknown_mutant", "@valid_case", "@missing", "@empty_dir", "@dir", "@shard0",
          "@shard1_seed2", "@shard1", "@whole", "@not_json"}) {
      if (value.starts_with(token)) {
        value = fixtures().path(token) + value.substr(token.size());
        break;
      }
    }
    out.push_back(value);
  }
  return out;
}

class ToolMisuse : public ::testing::TestWithParam<Misuse> {};

TEST_P(ToolMisuse, ExitsTwoWithOneLine) {
  const Misuse& misuse = GetParam();
  const CliResult result = run_infonce_sim(resolved(misuse.args));
  EXPECT_EQ(result.signal, 0) << "killed by signal " << result.signal;
  EXPECT_EQ(result.exit_code, 2) << result.out << result.err;
  EXPECT_EQ(result.out, "");
  const auto lines = lines_of(result.err);
  ASSERT_EQ(lines.size(), 1u) << result.err;
  EXPECT_TRUE(result.err.ends_with("\n"));
  EXPECT_TRUE(lines[0].starts_with("infonce-sim: error: ")) << lines[0];
  EXPECT_NE(lines[0].find(misuse.message_part), std::string::npos)
      << lines[0] << "\nexpected to contain: " << misuse.message_part;
}

INSTANTIATE_TEST_SUITE_P(Table, ToolMisuse, ::testing::ValuesIn(misuses()),
                         [](const ::testing::TestParamInfo<Misuse>& info) {
                           return info.param.name;
                         });

TEST(ToolMisuseTable, HasAtLeastFiftyUniquelyNamedRows) {
  const auto rows = misuses();
  EXPECT_GE(rows.size(), 50u);
  std::set<std::string> names;
  for (const Misuse& row : rows) EXPECT_TRUE(names.insert(row.name).second) << row.name;
}

// The fixtures themselves are fine: each row differs by its one defect.
TEST(ToolMisuseTable, TheFixturesAreValid) {
  const CliResult merged = run_infonce_sim(resolved({"merge", "@shard0", "@shard1"}));
  EXPECT_EQ(merged.exit_code, 0) << merged.err;
  const CliResult replayed = run_infonce_sim(resolved({"replay", "@valid_case"}));
  EXPECT_TRUE(replayed.exit_code == 0 || replayed.exit_code == 1) << replayed.err;
}

}  // namespace
}  // namespace infonce::tool_test
