// Bad input through the binary: every row of the malformed-case table
// (tests/casefile/bad_case_table.hpp) and command-line misuse must give exit
// code 2, nothing on stdout, and exactly one line on stderr:
//   infonce-sim: error: <message naming the file and key, or the option>
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/casefile/bad_case_table.hpp"
#include "tests/cli/cli_runner.hpp"

namespace infonce::cli_test {
namespace {

namespace fs = std::filesystem;
using infonce::testing::BadCase;

// Exit 2, empty stdout, one stderr line; returns the message after the prefix.
std::string expect_one_line_error(const CliResult& result) {
  EXPECT_EQ(result.signal, 0) << "killed by signal " << result.signal;
  EXPECT_EQ(result.exit_code, 2) << result.err;
  EXPECT_EQ(result.out, "");
  const auto lines = lines_of(result.err);
  EXPECT_EQ(lines.size(), 1u) << result.err;
  EXPECT_TRUE(result.err.ends_with("\n")) << result.err;
  const std::string prefix = "infonce-sim: error: ";
  EXPECT_TRUE(result.err.starts_with(prefix)) << result.err;
  if (lines.empty() || !lines[0].starts_with(prefix)) return "";
  return lines[0].substr(prefix.size());
}

class BadCaseFile : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadCaseFile, ExitsTwoWithOneLineNamingTheKey) {
  const BadCase& bad = GetParam();
  const fs::path file =
      write_text_file(fresh_work_dir("bad-" + bad.name) / (bad.name + ".json"), bad.text);
  const std::string message =
      expect_one_line_error(run_infonce_sim({"reference", "--case", file.string(), "--json"}));
  const std::string expected_start = file.string() + ": " + bad.path + ": ";
  EXPECT_TRUE(message.starts_with(expected_start)) << message << "\nexpected " << expected_start;
  EXPECT_NE(message.find(bad.detail), std::string::npos) << message;
}

INSTANTIATE_TEST_SUITE_P(Table, BadCaseFile, ::testing::ValuesIn(infonce::testing::bad_cases()),
                         [](const ::testing::TestParamInfo<BadCase>& info) {
                           return info.param.name;
                         });

// The table's base case itself is fine: each row differs from it by one defect.
TEST(BadCaseFile, TheTablesValidCaseRuns) {
  const fs::path file = write_text_file(fresh_work_dir("bad-valid") / "valid.json",
                                        std::string(infonce::testing::kValidCaseText));
  const CliResult result = run_infonce_sim({"reference", "--case", file.string(), "--json"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.err, "");
}

// --- command-line misuse

struct Misuse {
  std::string name;
  std::vector<std::string> args;
  std::string message;  // the whole message after "infonce-sim: error: "
};

// GoogleTest prints a parameter with this (not as a dump of its bytes).
void PrintTo(const Misuse& misuse, std::ostream* out) {
  *out << misuse.name;
}

std::vector<Misuse> misuses() {
  const fs::path dir = fresh_work_dir("misuse");
  const std::string missing = (dir / "no-such-case.json").string();
  const std::string empty = write_text_file(dir / "empty.json", "").string();
  const std::string dir_name = dir.string();
  return {
      {"no_arguments", {}, "no command given (see infonce-sim --help)"},
      {"unknown_command", {"frobnicate"}, "unknown command 'frobnicate' (see infonce-sim --help)"},
      {"unknown_top_level_option",
       {"--bogus"},
       "unknown option '--bogus' (a command comes first; see infonce-sim --help)"},
      {"unknown_option",
       {"reference", "--case", missing, "--bogus"},
       "reference: unrecognised option '--bogus' (see infonce-sim reference --help)"},
      {"abbreviated_option",
       {"reference", "--cas", missing},
       "reference: unrecognised option '--cas' (see infonce-sim reference --help)"},
      {"missing_case", {"reference", "--json"}, "reference: missing --case FILE"},
      {"case_without_value",
       {"reference", "--case"},
       "reference: the required argument for option '--case' is missing (see infonce-sim "
       "reference --help)"},
      {"case_twice",
       {"reference", "--case", missing, "--case", missing},
       "reference: option '--case' cannot be specified more than once (see infonce-sim "
       "reference --help)"},
      {"stray_argument",
       {"reference", "--case", missing, "extra"},
       "reference: too many positional options have been specified on the command line (see "
       "infonce-sim reference --help)"},
      {"unreadable_file",
       {"reference", "--case", missing},
       missing + ": cannot read: No such file or directory"},
      {"directory_instead_of_file",
       {"reference", "--case", dir_name},
       dir_name + ": is a directory, expected a case file"},
      {"empty_file",
       {"reference", "--case", empty},
       empty + ": (top level): invalid JSON: parse error at line 1, column 1: syntax error while "
               "parsing value - unexpected end of input; expected '[', '{', or a literal"},
      {"help_for_unknown_command", {"help", "frobnicate"}, "help: unknown command 'frobnicate'"},
      {"version_with_argument", {"--version", "x"}, "--version takes no argument"},
  };
}

class CommandLineMisuse : public ::testing::TestWithParam<Misuse> {};

TEST_P(CommandLineMisuse, ExitsTwoWithOneLine) {
  const Misuse& misuse = GetParam();
  EXPECT_EQ(expect_one_line_error(run_infonce_sim(misuse.args)), misuse.message);
}

INSTANTIATE_TEST_SUITE_P(Cli, CommandLineMisuse, ::testing::ValuesIn(misuses()),
                         [](const ::testing::TestParamInfo<Misuse>& info) {
                           return info.param.name;
                         });

// --- what is not misuse

TEST(CommandLine, VersionAndHelpExitZero) {
  const CliResult version = run_infonce_sim({"--version"});
  EXPECT_EQ(version.exit_code, 0);
  // project(VERSION) and, from a git checkout, the commit CMake configured at.
  const std::string commit = INFONCE_EXPECTED_GIT_COMMIT;
  EXPECT_EQ(version.out, "infonce-sim " INFONCE_EXPECTED_VERSION +
                             (commit.empty() ? std::string() : " (git " + commit + ")") + "\n");

  const CliResult help = run_infonce_sim({"--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("\n  reference "), std::string::npos) << help.out;
  EXPECT_EQ(help.err, "");

  const CliResult command_help = run_infonce_sim({"reference", "--help"});
  EXPECT_EQ(command_help.exit_code, 0);
  EXPECT_TRUE(command_help.out.starts_with("usage: infonce-sim reference --case FILE [--json]\n"))
      << command_help.out;
  EXPECT_EQ(run_infonce_sim({"help", "reference"}).out, command_help.out);
}

// The exit codes --help states are the ones the commands use (cli/command.hpp;
// 130 comes from `check` on Ctrl-C, tested in tests/tool).
TEST(CommandLine, HelpStatesEveryExitCode) {
  const CliResult help = run_infonce_sim({"--help"});
  const auto lines = lines_of(help.out);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.back(),
            "exit codes: 0 ok, 1 a check failed, 2 bad input or usage, 3 simulation error, 4 "
            "internal error (a bug, or out of memory), 130 check interrupted (Ctrl-C; the "
            "report is still printed)");
  EXPECT_EQ(run_infonce_sim({"run", "--case", "/nonexistent.json"}).exit_code, 2);
  EXPECT_EQ(run_infonce_sim({"mutants"}).exit_code, 0);
}

// `check --help` describes every option its usage line shows.
TEST(CommandLine, CheckHelpDescribesBackend) {
  const CliResult help = run_infonce_sim({"check", "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("\n  --backend fiber|mpi "), std::string::npos) << help.out;
}

}  // namespace
}  // namespace infonce::cli_test
