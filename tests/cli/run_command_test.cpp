// `infonce-sim run` as a user sees it: the real trainer's cases, exit codes,
// and results that do not depend on the fiber schedule.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_runner.hpp"

namespace infonce::cli_test {
namespace {

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
  const CliResult fixed = run_infonce_sim({"run", "--case", corpus_case("w4d4-004-fixed.json"), "--json"});
  EXPECT_EQ(fixed.exit_code, 0) << fixed.err;
  const auto fixed_json = nlohmann::json::parse(fixed.out);
  EXPECT_TRUE(fixed_json["pass"].get<bool>());
  EXPECT_TRUE(fixed_json["expect"]["met"].get<bool>());
  EXPECT_NEAR(fixed_json["ratio"].get<double>(), 1.0, 1e-12);

  // Before the fix: real DDP's values are reproduced (expect met), and the
  // gradient is the reference / P, so the run fails.
  const CliResult prefix = run_infonce_sim({"run", "--case", corpus_case("w4d4-004-prefix.json"), "--json"});
  EXPECT_EQ(prefix.exit_code, 1);
  const auto prefix_json = nlohmann::json::parse(prefix.out);
  EXPECT_FALSE(prefix_json["pass"].get<bool>());
  EXPECT_TRUE(prefix_json["expect"]["met"].get<bool>());
  EXPECT_NEAR(prefix_json["ratio"].get<double>(), 0.25, 1e-12);
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
