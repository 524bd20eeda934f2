// `infonce-sim run` as a user sees it: the real trainer's cases, exit codes,
// and results that do not depend on the fiber schedule.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_runner.hpp"

namespace infonce::cli_test {
namespace {

namespace fs = std::filesystem;

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string corpus_case(const std::string& name) {
  return (source_dir() / "corpus/real-trainer/cases" / name).string();
}

TEST(RunCommand, ScheduleSeedDoesNotChangeOneBit) {
  for (const char* name : {"w4d4-004-fixed.json", "w4d2-009-fixed.json", "w2d2-014-prefix.json"}) {
    const CliResult fifo = run_infonce_sim({"run", "--case", corpus_case(name), "--json"});
    ASSERT_FALSE(fifo.out.empty()) << fifo.err;
    for (const char* seed : {"1", "2", "12345"}) {
      const CliResult other =
          run_infonce_sim({"run", "--case", corpus_case(name), "--json", "--schedule-seed", seed});
      EXPECT_EQ(other.exit_code, fifo.exit_code) << name;
      EXPECT_EQ(other.out, fifo.out) << name << " schedule seed " << seed;
    }
  }
}

TEST(RunCommand, FixedCasePassesAndPrefixCaseShowsTheBug) {
  const CliResult fixed =
      run_infonce_sim({"run", "--case", corpus_case("w4d4-004-fixed.json"), "--json"});
  EXPECT_EQ(fixed.exit_code, 0) << fixed.err;
  const auto fixed_json = nlohmann::json::parse(fixed.out);
  EXPECT_TRUE(fixed_json["pass"].get<bool>());
  EXPECT_TRUE(fixed_json["expect"]["met"].get<bool>());
  EXPECT_NEAR(fixed_json["ratio"].get<double>(), 1.0, 1e-12);

  // Before the fix: real DDP's values are reproduced (expect met), and the
  // gradient is the reference / P, so the run fails.
  const CliResult prefix =
      run_infonce_sim({"run", "--case", corpus_case("w4d4-004-prefix.json"), "--json"});
  EXPECT_EQ(prefix.exit_code, 1);
  const auto prefix_json = nlohmann::json::parse(prefix.out);
  EXPECT_FALSE(prefix_json["pass"].get<bool>());
  EXPECT_TRUE(prefix_json["expect"]["met"].get<bool>());
  EXPECT_NEAR(prefix_json["ratio"].get<double>(), 0.25, 1e-12);
}

// A verdict names the check that failed. This real-trainer file meets its
// expect and its gradient matches the reference, but the trainer's legacy
// padding drew the positive as a negative 12 times: only `padding` fails.
TEST(RunCommand, VerdictNamesTheFailedCheckOnly) {
  const std::string file = corpus_case("w4d2-000-fixed.json");
  const CliResult json = run_infonce_sim({"run", "--case", file, "--json"});
  EXPECT_EQ(json.exit_code, 1) << json.err;
  const auto report = nlohmann::json::parse(json.out);
  EXPECT_FALSE(report["pass"].get<bool>());
  EXPECT_EQ(report["failed"], nlohmann::json::array({"padding"}));
  EXPECT_TRUE(report["checks"]["gradient"]["pass"].get<bool>());
  EXPECT_LT(report["max_abs_err"].get<double>(), 1e-15);
  EXPECT_TRUE(report["checks"]["loss"]["pass"].get<bool>());
  EXPECT_FALSE(report["checks"]["padding"]["pass"].get<bool>());
  EXPECT_EQ(report["checks"]["padding"]["padded_positives"], 12);
  EXPECT_TRUE(report["checks"]["expect"]["pass"].get<bool>());

  const CliResult text = run_infonce_sim({"run", "--case", file});
  EXPECT_EQ(text.exit_code, 1);
  const auto lines = lines_of(text.out);
  ASSERT_GE(lines.size(), 5u) << text.out;
  EXPECT_EQ(lines.back(), "verdict: FAIL (padding)");
  EXPECT_TRUE(lines[lines.size() - 5].starts_with("  gradient  pass  max error ")) << text.out;
  EXPECT_TRUE(lines[lines.size() - 4].starts_with("  loss      pass  ")) << text.out;
  EXPECT_TRUE(lines[lines.size() - 3].starts_with(
      "  padding   FAIL  padding drew a group's positive as a negative 12 time(s)"))
      << text.out;
  EXPECT_TRUE(lines[lines.size() - 2].starts_with("  expect    pass  met: ")) << text.out;
  EXPECT_EQ(text.out.find("DIFFERS"), std::string::npos) << text.out;
}

TEST(RunCommand, EveryCheckPassesOnAFileWithoutPaddingOfThePositive) {
  const CliResult result =
      run_infonce_sim({"run", "--case", corpus_case("w4d2-001-fixed.json"), "--json"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  const auto report = nlohmann::json::parse(result.out);
  EXPECT_TRUE(report["pass"].get<bool>());
  EXPECT_EQ(report["failed"], nlohmann::json::array());
  EXPECT_EQ(report["checks"]["padding"]["padded_positives"], 0);
}

// Without expect, the expect check is not judged (null), and the verdict
// rests on the other three.
TEST(RunCommand, ExpectIsNotJudgedWithoutExpect) {
  const fs::path dir = fresh_work_dir("run-no-expect");
  auto c = nlohmann::json::parse(read_text(corpus_case("w4d4-004-prefix.json")));
  c.erase("expect");
  const fs::path file = write_text_file(dir / "case.json", c.dump());
  const CliResult result = run_infonce_sim({"run", "--case", file.string(), "--json"});
  EXPECT_EQ(result.exit_code, 1);
  const auto report = nlohmann::json::parse(result.out);
  EXPECT_EQ(report["failed"], nlohmann::json::array({"gradient"}));  // ratio 1/P by design
  EXPECT_TRUE(report["checks"]["expect"]["pass"].is_null());
  EXPECT_NEAR(report["ratio"].get<double>(), 0.25, 1e-12);
}

// use_batch false: the reference loss is the DDP objective (mean of the
// per-rank means), and the table says so on its rows.
TEST(RunCommand, UseBatchFalseRowsSayTheReferenceIsTheDdpObjective) {
  const fs::path dir = fresh_work_dir("run-local");
  auto c = nlohmann::json::parse(read_text(corpus_case("w4d2-001-fixed.json")));
  c.erase("expect");
  c["loss"]["use_batch"] = false;
  const fs::path file = write_text_file(dir / "case.json", c.dump());
  const CliResult result = run_infonce_sim({"run", "--case", file.string()});
  EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
  const auto lines = lines_of(result.out);
  int notes = 0;
  for (std::size_t i = 1; i < lines.size(); ++i) {
    if (lines[i].find("the reference loss is the DDP objective, the mean of the per-rank means") ==
        std::string::npos)
      continue;
    ++notes;
    EXPECT_TRUE(lines[i - 1].find("the fix") != std::string::npos) << lines[i - 1];
  }
  EXPECT_EQ(notes, 2) << result.out;
}

TEST(RunCommand, HumanTableShowsBeforeAndAfter) {
  const CliResult result = run_infonce_sim({"run", "--case", corpus_case("w2d2-016-fixed.json")});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("before the fix (compensate: false)"), std::string::npos);
  EXPECT_NE(result.out.find("with the fix (compensate: true)"), std::string::npos);
  EXPECT_NE(result.out.find("0.500000000"), std::string::npos) << result.out;  // ratio 1/P
}

TEST(RunCommand, UnknownMutantIsBadInput) {
  const CliResult result =
      run_infonce_sim({"run", "--case", corpus_case("w2d2-016-fixed.json"), "--mutant", "nope"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(lines_of(result.err).size(), 1u) << result.err;
}

}  // namespace
}  // namespace infonce::cli_test
