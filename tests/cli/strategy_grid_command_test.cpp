// `check --strategies all --family all` through the binary: one row per
// (family, point) cell, 3 families x 72 points, each with its even share of
// the budget and as predicted; the same bytes with one or two jobs; bad
// input (exit 2, one line). 432 cases, twice: about 2 s.
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/cli/cli_runner.hpp"

namespace infonce::cli_test {
namespace {

struct Row {
  std::string family, point;
  long cases = 0, judged = 0, mismatched = 0;
  std::string result;
};

// The table's rows: "family point cases W>P judged c/r/n shown c/r/n shown
// mismatch result...".
std::vector<Row> grid_rows(const std::string& out) {
  std::vector<Row> rows;
  for (const std::string& line : lines_of(out)) {
    std::istringstream words(line);
    Row row;
    std::string replicas, counts[4];
    if (!(words >> row.family >> row.point >> row.cases >> replicas >> row.judged >> counts[0] >>
          counts[1] >> counts[2] >> counts[3] >> row.mismatched)) {
      continue;
    }
    std::getline(words >> std::ws, row.result);
    rows.push_back(row);
  }
  return rows;
}

TEST(StrategyGridCommand, EveryFamilyAtEveryPointGetsAnEvenShareAndIsAsPredicted) {
  const std::vector<std::string> args = {"check", "--strategies", "all", "--family",
                                         "all",   "--cases",      "576"};
  const CliResult result = run_infonce_sim(args);
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  const std::vector<Row> rows = grid_rows(result.out);
  ASSERT_EQ(rows.size(), 4u * 72u) << result.out;
  std::map<std::string, int> per_family, per_point;
  for (const Row& row : rows) {
    ++per_family[row.family];
    ++per_point[row.point];
    EXPECT_EQ(row.cases, 2) << row.family << " " << row.point;
    EXPECT_GT(row.judged, 0) << row.family << " " << row.point;
    EXPECT_EQ(row.mismatched, 0) << row.family << " " << row.point;
    EXPECT_EQ(row.result, "as predicted") << row.family << " " << row.point;
  }
  EXPECT_EQ(per_family, (std::map<std::string, int>{
                            {"clip", 72}, {"infonce", 72}, {"ntxent", 72}, {"siglip", 72}}));
  EXPECT_EQ(per_point.size(), 72u);
  EXPECT_EQ(per_point["autograd/local/scale-W/sum/world"], 4);
  EXPECT_NE(result.out.find("PASS: every one of the 288 cells is as predicted (576 cases)"),
            std::string::npos)
      << result.out;
  // The cells on two threads: the same bytes.
  std::vector<std::string> two_jobs = args;
  two_jobs.insert(two_jobs.end(), {"--jobs", "2"});
  EXPECT_EQ(run_infonce_sim(two_jobs).out, result.out);
}

// One point: its four family cells; a budget that does not divide evenly
// gives the first cells one more case.
TEST(StrategyGridCommand, OnePointRunsItInEveryFamily) {
  const CliResult result = run_infonce_sim(
      {"check", "--strategies", "autograd/local/scale-1/mean", "--family", "all", "--cases", "7"});
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  const std::vector<Row> rows = grid_rows(result.out);
  ASSERT_EQ(rows.size(), 4u) << result.out;
  EXPECT_EQ(rows[0].family, "infonce");
  EXPECT_EQ(rows[1].family, "clip");
  EXPECT_EQ(rows[2].family, "ntxent");
  EXPECT_EQ(rows[3].family, "siglip");
  EXPECT_EQ(rows[0].cases, 2);
  EXPECT_EQ(rows[1].cases, 2);
  EXPECT_EQ(rows[2].cases, 2);
  EXPECT_EQ(rows[3].cases, 1);
}

void expect_bad_input(const std::vector<std::string>& extra, const std::string& fragment) {
  std::vector<std::string> args = {"check", "--strategies", "all", "--family", "all"};
  args.insert(args.end(), extra.begin(), extra.end());
  const CliResult result = run_infonce_sim(args);
  EXPECT_EQ(result.exit_code, 2) << result.err;
  EXPECT_EQ(result.out, "");
  EXPECT_EQ(lines_of(result.err).size(), 1u) << result.err;
  EXPECT_NE(result.err.find(fragment), std::string::npos) << result.err;
}

TEST(StrategyGridCommand, BadInputGivesOneLineAndExitTwo) {
  expect_bad_input({"--format", "json"}, "--family all prints its table only");
  expect_bad_input({"--case-index", "3"}, "--case-index does not apply to --family all");
  expect_bad_input({"--sut", "true"}, "--sut does not apply to --family all");
  expect_bad_input({"--profile", "ci"}, "--profile does not apply to --family all");
  expect_bad_input({"--jobs", "0"}, "--jobs must be");
  expect_bad_input({"--cases", "x"}, "--cases must be");
}

}  // namespace
}  // namespace infonce::cli_test
