// `infonce-sim check` as a CI tool, through the binary: byte-identical
// output, jobs and shards that do not change the report, merging, budgets,
// seeds from commits, profiles, formats, and a failure that leaves a case
// file and a command reproducing it exactly.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/rng.hpp"
#include "base/concat.hpp"
#include "properties/properties.hpp"
#include "tests/cli/cli_runner.hpp"
#include "tests/tool/xml_check.hpp"

extern char** environ;

namespace infonce::tool_test {
namespace {

namespace fs = std::filesystem;
using cli_test::CliResult;
using cli_test::fresh_work_dir;
using cli_test::lines_of;
using cli_test::run_infonce_sim;
using Json = nlohmann::json;

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The words of a printed command line (no quoting needed in these tests).
std::vector<std::string> words_of(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> words;
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

std::string line_starting(const std::string& text, const std::string& prefix) {
  for (const std::string& line : lines_of(text)) {
    if (line.starts_with(prefix)) return line;
  }
  return "";
}

// The block `check` prints for a failure: from "FAILED at case" to the end.
std::string failure_block(const std::string& text) {
  const auto at = text.find("FAILED at case");
  return at == std::string::npos ? "" : text.substr(at);
}

// --- determinism

TEST(Check, OutputIsByteIdenticalAcrossRuns) {
  const std::vector<std::string> args{"check", "--seed", "4", "--cases", "300", "--no-corpus"};
  const CliResult first = run_infonce_sim(args);
  const CliResult second = run_infonce_sim(args);
  EXPECT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(first.out, second.out);
  EXPECT_TRUE(first.out.starts_with("check: seed 4, 300 cases (")) << first.out;
  EXPECT_NE(first.out.find("PASSED: every property held on every case"), std::string::npos);
  EXPECT_EQ(first.err, "");  // no progress line when stderr is not a terminal
}

TEST(Check, JsonReportIsTheSameForOneAndTwoJobs) {
  for (const std::string mutant : {"", "labels-ungathered"}) {
    std::vector<std::string> args{"check", "--seed",   "6",    "--cases",
                                  "400",   "--format", "json", "--no-corpus"};
    if (!mutant.empty()) args.insert(args.end(), {"--mutant", mutant});
    auto one = args, two = args;
    one.insert(one.end(), {"--jobs", "1"});
    two.insert(two.end(), {"--jobs", "2"});
    const CliResult a = run_infonce_sim(one), b = run_infonce_sim(two);
    EXPECT_EQ(a.exit_code, mutant.empty() ? 0 : 1) << a.err;
    EXPECT_EQ(a.out, b.out) << "mutant " << mutant;
    EXPECT_EQ(Json::parse(a.out)["result"], mutant.empty() ? "passed" : "failed");
  }
}

// --- shards and merge

struct ShardCase {
  std::string name;
  std::vector<std::string> campaign;  // options shared by every run
  int shards;
};

// GoogleTest prints a parameter with this (not as a dump of its bytes).
void PrintTo(const ShardCase& shard_case, std::ostream* out) {
  *out << shard_case.name << " (" << shard_case.shards << " shards)";
}

class ShardMerge : public ::testing::TestWithParam<ShardCase> {};

TEST_P(ShardMerge, MergedShardReportsEqualTheUnshardedReport) {
  const ShardCase& param = GetParam();
  const fs::path dir = fresh_work_dir("shards-" + param.name);
  auto check = [&](std::vector<std::string> extra) {
    std::vector<std::string> args{"check", "--format", "json", "--no-corpus"};
    args.insert(args.end(), param.campaign.begin(), param.campaign.end());
    args.insert(args.end(), extra.begin(), extra.end());
    return run_infonce_sim(args);
  };
  const CliResult whole = check({});
  ASSERT_TRUE(whole.exit_code == 0 || whole.exit_code == 1) << whole.err;
  std::vector<std::string> merge{"merge", "--format", "json"};
  for (int i = 0; i < param.shards; ++i) {
    const std::string shard = std::to_string(i) + "/" + std::to_string(param.shards);
    const fs::path report = dir / ("shard-" + std::to_string(i) + ".json");
    const CliResult part = check({"--shard", shard, "--report", report.string()});
    ASSERT_TRUE(part.exit_code == 0 || part.exit_code == 1) << part.err;
    EXPECT_EQ(read_file(report), part.out);  // --report FILE.json is what --format json prints
    EXPECT_EQ(Json::parse(part.out)["shards"]["indices"], Json::array({i}));
    merge.push_back(report.string());
  }
  const CliResult merged = run_infonce_sim(merge);
  EXPECT_EQ(merged.exit_code, whole.exit_code) << merged.err;
  EXPECT_EQ(merged.out, whole.out);
  // And the human rendering of the merge is check's.
  merge[2] = "human";
  std::vector<std::string> human{"check", "--no-corpus"};
  human.insert(human.end(), param.campaign.begin(), param.campaign.end());
  EXPECT_EQ(run_infonce_sim(merge).out, run_infonce_sim(human).out);
}

INSTANTIATE_TEST_SUITE_P(
    Campaigns, ShardMerge,
    ::testing::Values(
        ShardCase{"passing_two", {"--seed", "8", "--cases", "500"}, 2},
        ShardCase{
            "passing_three_typical", {"--seed", "9", "--cases", "450", "--limits", "typical"}, 3},
        // The failure is in shard 1's block; shard 0 runs past it.
        ShardCase{"mutant_failure_in_a_later_block",
                  {"--seed", "1", "--cases", "2000", "--mutant", "legacy-padding"},
                  2},
        ShardCase{
            "mutant_failure_early", {"--seed", "1", "--cases", "2000", "--mutant", "ga-twice"}, 3},
        ShardCase{"self_check", {"--seed", "10", "--cases", "200", "--self-check"}, 2}),
    [](const auto& info) { return info.param.name; });

TEST(Merge, PartialMergesMergeFurther) {
  const fs::path dir = fresh_work_dir("merge-partial");
  std::vector<std::string> files;
  for (int i = 0; i < 3; ++i) {
    files.push_back((dir / ("s" + std::to_string(i) + ".json")).string());
    run_infonce_sim({"check", "--seed", "11", "--cases", "300", "--no-corpus", "--shard",
                     std::to_string(i) + "/3", "--report", files.back()});
  }
  const std::string partial = (dir / "s01.json").string();
  const CliResult first = run_infonce_sim({"merge", files[0], files[1], "--report", partial});
  EXPECT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(Json::parse(read_file(partial))["shards"]["indices"], Json::array({0, 1}));
  const CliResult all = run_infonce_sim({"merge", partial, files[2], "--format", "json"});
  const CliResult whole = run_infonce_sim(
      {"check", "--seed", "11", "--cases", "300", "--no-corpus", "--format", "json"});
  EXPECT_EQ(all.out, whole.out);
}

// --- budgets

TEST(Check, TimeBudgetReportsTheCasesReachedAndEqualsThatCaseBudget) {
  const CliResult timed = run_infonce_sim({"check", "--seed", "12", "--time-budget", "1s", "--jobs",
                                           "2", "--format", "json", "--no-corpus"});
  ASSERT_EQ(timed.exit_code, 0) << timed.err;
  const Json report = Json::parse(timed.out);
  EXPECT_EQ(report["stopped_by"], "time");
  EXPECT_EQ(report["budget"]["time"], "1s");
  const std::int64_t reached = report["tally"]["cases_run"];
  ASSERT_GT(reached, 0);
  EXPECT_EQ(report["covered"], Json::array({Json::array({0, reached})}));
  // Stopping by the clock happens at a case boundary of the sequential run.
  const CliResult counted =
      run_infonce_sim({"check", "--seed", "12", "--cases", std::to_string(reached), "--format",
                       "json", "--no-corpus"});
  EXPECT_EQ(Json::parse(counted.out)["tally"], report["tally"]);
  const CliResult human = run_infonce_sim(
      {"check", "--seed", "12", "--time-budget", "500ms", "--cases", "100000", "--no-corpus"});
  EXPECT_NE(human.out.find("  stopped by the time budget (500ms) after "), std::string::npos)
      << human.out;
}

TEST(Check, CaseBudgetEndsFirstWhenSmaller) {
  const CliResult result =
      run_infonce_sim({"check", "--seed", "12", "--cases", "64", "--time-budget", "10m", "--format",
                       "json", "--no-corpus"});
  const Json report = Json::parse(result.out);
  EXPECT_EQ(report["stopped_by"], "cases");
  EXPECT_EQ(report["tally"]["cases_run"], 64);
}

// --- seeds and profiles

std::uint64_t seed_printed(const std::string& out) {
  return std::stoull(out.substr(std::string("check: seed ").size()));
}

TEST(Check, SeedFromACommitHashShortOrFull) {
  const std::string full = "3f2a9c1e0b7d4a5f6e8c9b0a1d2e3f4a5b6c7d8e";
  const CliResult shorter = run_infonce_sim({"check", "--seed", "3f2a9c1", "--cases", "1"});
  const CliResult longer = run_infonce_sim({"check", "--seed", full, "--cases", "1"});
  ASSERT_EQ(shorter.exit_code, 0) << shorter.err;
  // The documented mapping: derive_seed("commit", the first 7 hex digits).
  EXPECT_EQ(seed_printed(shorter.out), derive_seed(0x636f6d6d6974ULL, 0x3f2a9c1ULL));
  EXPECT_EQ(seed_printed(longer.out), seed_printed(shorter.out));
  EXPECT_NE(shorter.out.find("\n  seed from commit 3f2a9c1\n"), std::string::npos) << shorter.out;
  // Digits only read as a number unless marked as a commit.
  EXPECT_EQ(seed_printed(run_infonce_sim({"check", "--seed", "1234567", "--cases", "1"}).out),
            1234567u);
  EXPECT_EQ(
      seed_printed(run_infonce_sim({"check", "--seed", "commit:1234567", "--cases", "1"}).out),
      derive_seed(0x636f6d6d6974ULL, 0x1234567ULL));
  EXPECT_EQ(seed_printed(run_infonce_sim({"check", "--seed", "0xff", "--cases", "1"}).out), 255u);
}

TEST(Check, SeedGitIsTheHeadCommit) {
  FILE* pipe = ::popen(
      ("git -C " + cli_test::source_dir().string() + " rev-parse HEAD 2>/dev/null").c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  char buffer[128] = {};
  const std::size_t read = std::fread(buffer, 1, sizeof buffer - 1, pipe);
  if (::pclose(pipe) != 0 || read < 40) GTEST_SKIP() << "not a git checkout";
  const std::string head(buffer, 40);
  // The test runs inside the checkout (its build tree), so git finds HEAD.
  const CliResult result = run_infonce_sim({"check", "--seed", "git", "--cases", "1"});
  if (result.exit_code == 2) GTEST_SKIP() << "the build tree is outside the checkout";
  EXPECT_EQ(seed_printed(result.out),
            seed_printed(run_infonce_sim({"check", "--seed", head, "--cases", "1"}).out));
  EXPECT_NE(result.out.find("seed from commit " + head), std::string::npos) << result.out;
}

TEST(Check, ProfileCiIsDerandomised) {
  const std::vector<std::string> args{"check", "--profile", "ci",   "--cases",
                                      "150",   "--format",  "json", "--no-corpus"};
  const CliResult first = run_infonce_sim(args);
  EXPECT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(first.out, run_infonce_sim(args).out);
  const Json report = Json::parse(first.out);
  EXPECT_EQ(report["seed"], 1);
  EXPECT_EQ(report["budget"]["time"], nullptr);
  const CliResult budgeted =
      run_infonce_sim({"check", "--profile", "ci", "--time-budget", "1m", "--no-corpus"});
  EXPECT_EQ(budgeted.exit_code, 2);
}

// --- formats

TEST(Check, JunitIsWellFormedXmlWithATestcasePerPropertyAndMutant) {
  const CliResult result =
      run_infonce_sim({"check", "--seed", "1", "--cases", "200", "--mutant", "ga-twice",
                       "--self-check", "--format", "junit", "--no-corpus"});
  EXPECT_EQ(result.exit_code, 1) << result.err;
  XmlChecker xml(result.out);
  ASSERT_EQ(xml.check(), "") << result.out;
  std::vector<std::string> testcases;
  std::string failures;
  for (const XmlElement& element : xml.elements()) {
    if (element.name == "testcase") testcases.push_back(element.attributes.at("name"));
    if (element.name == "testsuite") failures = element.attributes.at("failures");
  }
  std::vector<std::string> expected = properties::property_names();
  expected.push_back("ga-twice is caught");
  expected.push_back("reruns are bit-identical");
  expected.push_back("within the discard budget");
  EXPECT_EQ(testcases, expected);
  // gradient-matches-reference, with the shrunk case, and oracle-agrees: the
  // step's gradient is wrong against the oracle too.
  EXPECT_EQ(failures, "2");
  // The reproduce command starts with the program as it was invoked.
  EXPECT_NE(result.out.find("reproduce: " + std::string(INFONCE_SIM_BINARY) +
                            " replay --seed 1 --case-index 1 --mutant ga-twice --no-corpus"),
            std::string::npos)
      << result.out;
}

TEST(Check, PassingJunitHasNoFailure) {
  const CliResult result =
      run_infonce_sim({"check", "--seed", "3", "--cases", "100", "--format", "junit"});
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_EQ(xml_problem(result.out), "");
  // A test per property (9), and the discard budget's.
  EXPECT_NE(result.out.find("<testsuites name=\"infonce-sim\" tests=\"10\" failures=\"0\""),
            std::string::npos)
      << result.out;
}

TEST(Check, SvgAndHtmlReportsAreWellFormed) {
  const fs::path dir = fresh_work_dir("pictures");
  for (const std::string mutant : {"", "per-rank-rng"}) {
    const fs::path svg = dir / ("campaign" + mutant + ".svg");
    const fs::path html = dir / ("campaign" + mutant + ".html");
    std::vector<std::string> args{"check",    "--seed",      "3",        "--cases",
                                  "300",      "--no-corpus", "--report", svg.string(),
                                  "--report", html.string()};
    if (!mutant.empty()) args.insert(args.end(), {"--mutant", mutant});
    run_infonce_sim(args);
    const std::string picture = read_file(svg);
    EXPECT_EQ(xml_problem(picture), "") << svg;
    EXPECT_TRUE(picture.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    for (const char* axis : {"world", "use_batch", "hard_negatives", "temperature", "scalar"}) {
      EXPECT_NE(picture.find(concat(">", axis, "</text>")), std::string::npos) << axis;
    }
    EXPECT_NE(picture.find("float64 tolerance 1e-12"), std::string::npos);
    const std::string page = read_file(html);
    EXPECT_TRUE(page.starts_with("<!DOCTYPE html>"));
    EXPECT_NE(page.find(picture), std::string::npos);  // the same picture, inline
  }
}

// --- a failure: corpus file, printed commands that reproduce it

TEST(Check, FailingMutantCampaignSavesACaseAndPrintsCommandsThatReproduceIt) {
  const fs::path corpus = fresh_work_dir("found") / "corpus";
  const CliResult check = run_infonce_sim({"check", "--seed", "1", "--cases", "2000", "--mutant",
                                           "ga-twice", "--corpus-dir", corpus.string()});
  ASSERT_EQ(check.exit_code, 1) << check.err;
  const std::string saved = line_starting(check.out, "  saved:    ").substr(12);
  ASSERT_FALSE(saved.empty()) << check.out;
  EXPECT_TRUE(fs::path(saved).parent_path() == corpus) << saved;
  EXPECT_TRUE(fs::path(saved).filename().string().starts_with("case-"));
  const Json file = Json::parse(read_file(saved));
  EXPECT_EQ(file["found"]["mutant"], "ga-twice");
  EXPECT_EQ(file["found"]["property"], properties::kGradientMatches);
  EXPECT_EQ(file["found"]["seed"], 1);
  EXPECT_EQ(file["found"]["case_index"], 1);

  // The first command regenerates and shrinks: the same lines, the same file.
  const auto replay = words_of(line_starting(check.out, "  reproduce: ").substr(13));
  ASSERT_GE(replay.size(), 2u);
  EXPECT_EQ(replay[0], INFONCE_SIM_BINARY);  // argv[0] as given: it runs as printed
  const CliResult again =
      run_infonce_sim(std::vector<std::string>(replay.begin() + 1, replay.end()));
  EXPECT_EQ(again.exit_code, 1) << again.err;
  EXPECT_EQ(failure_block(again.out), failure_block(check.out));
  EXPECT_EQ(std::distance(fs::directory_iterator(corpus), fs::directory_iterator()), 1);

  // The second checks the saved file: the same property lines.
  const auto from_file = words_of(line_starting(check.out, "         or: ").substr(13));
  const CliResult file_replay =
      run_infonce_sim(std::vector<std::string>(from_file.begin() + 1, from_file.end()));
  EXPECT_EQ(file_replay.exit_code, 1);
  const std::string property_line =
      line_starting(failure_block(check.out), "  gradient-matches-reference: ");
  ASSERT_FALSE(property_line.empty());
  EXPECT_NE(file_replay.out.find(property_line + "\n"), std::string::npos) << file_replay.out;
  // ... and the correct step passes it.
  const auto correct = run_infonce_sim({"replay", saved, "--mutant", "none"});
  EXPECT_EQ(correct.exit_code, 0) << correct.out;
}

TEST(Check, RerunningAFailingCampaignKeepsOneCorpusFile) {
  const fs::path corpus = fresh_work_dir("found-twice") / "corpus";
  const std::vector<std::string> args{"check",      "--seed",       "2",
                                      "--cases",    "500",          "--mutant",
                                      "ga-missing", "--corpus-dir", corpus.string()};
  const CliResult first = run_infonce_sim(args);
  const CliResult second = run_infonce_sim(args);
  EXPECT_EQ(first.exit_code, 1);
  EXPECT_EQ(first.out, second.out);
  EXPECT_EQ(std::distance(fs::directory_iterator(corpus), fs::directory_iterator()), 1);
}

TEST(Check, SelfCheckSaysHowManyCasesWereRerun) {
  const CliResult result =
      run_infonce_sim({"check", "--seed", "5", "--cases", "160", "--self-check", "--no-corpus"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("  self-check: 10 cases rerun"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("every bit agreed"), std::string::npos);
}

TEST(Replay, PassingCaseExitsZero) {
  const CliResult result = run_infonce_sim({"replay", "--seed", "1", "--case-index", "0"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_TRUE(result.out.starts_with("replay: seed 1, case 0, mutant none\n  case:     W="));
  EXPECT_NE(result.out.find("PASSED: every property held on this case"), std::string::npos);
}

}  // namespace
}  // namespace infonce::tool_test

namespace infonce::tool_test {
namespace {

// Ctrl-C: the campaign stops at a case boundary, prints its report, exits 130.
TEST(Check, InterruptEndsWithAReportOfWhatRan) {
  const fs::path dir = fresh_work_dir("interrupt");
  const fs::path out = dir / "out.json";
  std::vector<std::string> storage{INFONCE_SIM_BINARY, "check",     "--seed",   "3",
                                   "--cases",          "100000000", "--format", "json",
                                   "--no-corpus"};
  std::vector<char*> argv;
  for (std::string& arg : storage) argv.push_back(arg.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&actions);
  ::usleep(1'500'000);
  ::kill(pid, SIGINT);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 130);
  const Json report = Json::parse(read_file(out));
  EXPECT_EQ(report["stopped_by"], "interrupted");
  const std::int64_t ran = report["tally"]["cases_run"];
  EXPECT_GT(ran, 0);
  EXPECT_EQ(report["covered"], Json::array({Json::array({0, ran})}));
}

}  // namespace
}  // namespace infonce::tool_test
