// The campaign report model: JSON round trip, merging, histogram bins,
// escaping, and the commands that reproduce a failure.
#include <cmath>
#include <limits>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "base/error.hpp"
#include "properties/campaign_report.hpp"
#include "tests/tool/xml_check.hpp"

namespace infonce::tool_test {
namespace {

using namespace infonce::properties;

CampaignReport report_of(const CampaignOptions& options, const std::string& mutant = "") {
  CampaignReport report;
  report.seed = options.seed;
  report.mutant = mutant;
  report.case_budget = options.cases;
  report.shards = {options.shard.count, {options.shard.index}};
  report.result = run_campaign(options);
  return report;
}

TEST(ErrorHistogram, BinsByDecadeWithExactAndNonFiniteApart) {
  ErrorHistogram h;
  h.add(0.0);
  h.add(-0.0);
  h.add(std::numeric_limits<double>::quiet_NaN());
  h.add(std::numeric_limits<double>::infinity());
  h.add(1e-16);    // decade -16: bin 4
  h.add(9.9e-16);  // still decade -16
  h.add(1e-30);    // below the range: the first bin
  h.add(0.5);      // decade -1: bin 19
  h.add(5e3);      // above the range: the last bin
  EXPECT_EQ(h.exact, 2);
  EXPECT_EQ(h.non_finite, 2);
  EXPECT_EQ(h.bins[4], 2);
  EXPECT_EQ(h.bins[0], 1);
  EXPECT_EQ(h.bins[19], 1);
  EXPECT_EQ(h.bins[22], 1);
  EXPECT_EQ(h.total(), 9);
}

TEST(Report, JsonRoundTripsExactly) {
  CampaignOptions options;
  options.seed = 31;
  options.cases = 200;
  options.mutant = step::find_mutant("ga-missing");
  CampaignReport report = report_of(options, "ga-missing");
  ASSERT_TRUE(report.result.failure.has_value());
  report.saved_case = "corpus/found/case-0123456789abcdef.json";
  report.seed_source = "commit 3f2a9c1";
  const std::string json = report_to_json(report);
  const CampaignReport back = report_from_json(json);
  EXPECT_EQ(report_to_json(back), json);
  EXPECT_EQ(back.result.failure->case_index, report.result.failure->case_index);
  EXPECT_EQ(describe(back.result.failure->shrunk), describe(report.result.failure->shrunk));
}

TEST(Report, ShardReportsKeepTheirBlocksAndRoundTrip) {
  CampaignOptions options;
  options.seed = 32;
  options.cases = 300;
  options.shard = {1, 2};
  options.keep_blocks = true;
  const CampaignReport report = report_of(options);
  EXPECT_EQ(report.result.blocks.size(), 2u);  // blocks 1 and 3
  const std::string json = report_to_json(report);
  EXPECT_NE(json.find("\"blocks\": [\n"), std::string::npos);
  EXPECT_EQ(report_to_json(report_from_json(json)), json);
}

TEST(Report, MergeRefusesReportsOfDifferentCampaigns) {
  CampaignOptions options;
  options.cases = 64;
  options.keep_blocks = true;
  options.shard = {0, 2};
  const CampaignReport a = report_of(options);
  options.seed = 2;
  options.shard = {1, 2};
  const CampaignReport b = report_of(options);
  EXPECT_THROW(merge_reports({a, b}), InputError);
  EXPECT_THROW(merge_reports({a, a}), InputError);
  EXPECT_THROW(merge_reports({}), InputError);
}

TEST(Report, ReadingNamesTheBadKey) {
  EXPECT_THROW(report_from_json("[]"), InputError);
  EXPECT_THROW(report_from_json("{\"format\": \"infonce-case/1\"}"), InputError);
  try {
    report_from_json(R"({"format": "infonce-campaign/1", "block_cases": 64, "seed": -1})");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "seed: expected an integer >= 0");
  }
}

TEST(Report, ReproduceCommandsNameSeedIndexMutantAndCorpus) {
  CampaignReport report;
  report.seed = 7;
  report.mutant = "ga-twice";
  report.limits = "typical";
  report.result.failure = CampaignFailure{};
  report.result.failure->case_index = 12;
  report.saved_case = "my corpus/case-1.json";
  const auto commands = reproduce_commands(report);
  ASSERT_EQ(commands.size(), 2u);
  EXPECT_EQ(commands[0],
            "infonce-sim replay --seed 7 --case-index 12 --mutant ga-twice --limits typical "
            "--corpus-dir 'my corpus'");
  EXPECT_EQ(commands[1], "infonce-sim replay 'my corpus/case-1.json'");
  report.saved_case = "corpus/found/case-1.json";
  EXPECT_EQ(reproduce_commands(report)[0],
            "infonce-sim replay --seed 7 --case-index 12 --mutant ga-twice --limits typical");
}

// Coverage buckets read as numbers (1, 2, 3-4, ..., 17-32), not as text
// (1, 17-32, 2, ...); words follow the numbers.
TEST(Report, CoverageValuesAreInNumericOrder) {
  CampaignReport report;
  report.result.coverage["world"] = {{"1", 3},     {"17-32", 1}, {"2", 5},   {"3-4", 2},
                                     {"33-64", 4}, {"5-8", 6},   {"9-16", 7}};
  report.result.coverage["fake_neg_margin"] = {{"-0.1", 1}, {"0", 2}, {"0.1", 3}, {"unset", 4}};
  std::ostringstream text;
  write_report_text(text, report);
  EXPECT_NE(text.str().find("\n  world: 1=3 2=5 3-4=2 5-8=6 9-16=7 17-32=1 33-64=4\n"),
            std::string::npos)
      << text.str();
  EXPECT_NE(text.str().find("\n  fake_neg_margin: -0.1=1 0=2 0.1=3 unset=4\n"), std::string::npos)
      << text.str();
}

// The reproduce commands start with the program as invoked (argv[0]).
TEST(Report, ReproduceCommandsStartWithTheInvokedProgram) {
  CampaignReport report;
  report.seed = 3;
  report.program = "build dir/infonce-sim";
  report.result.failure = CampaignFailure{};
  report.result.failure->case_index = 5;
  report.saved_case = "corpus/found/case-1.json";
  const auto commands = reproduce_commands(report);
  ASSERT_EQ(commands.size(), 2u);
  EXPECT_EQ(commands[0], "'build dir/infonce-sim' replay --seed 3 --case-index 5");
  EXPECT_EQ(commands[1], "'build dir/infonce-sim' replay corpus/found/case-1.json");
}

TEST(Report, ShellWordsQuoteWhatAShellWouldSplit) {
  EXPECT_EQ(shell_word("corpus/found/a.json"), "corpus/found/a.json");
  EXPECT_EQ(shell_word("a b"), "'a b'");
  EXPECT_EQ(shell_word("it's"), "'it'\\''s'");
  EXPECT_EQ(shell_word(""), "''");
}

TEST(Report, XmlEscapingKeepsDocumentsWellFormed) {
  EXPECT_EQ(xml_escape("a<b & \"c\" 'd'>"), "a&lt;b &amp; &quot;c&quot; &apos;d&apos;&gt;");
  EXPECT_EQ(xml_escape(std::string("bell\a")), "bell?");
  EXPECT_EQ(xml_text("\"q\" <x>"), "\"q\" &lt;x&gt;");
  const std::string document =
      "<a t=\"" + xml_escape("<\"&\x01") + "\">" + xml_text("if (a < b && c > \"d\")\x02") + "</a>";
  EXPECT_EQ(xml_problem(document), "") << document;
}

TEST(XmlChecker, RejectsWhatIsNotWellFormed) {
  EXPECT_EQ(xml_problem("<a><b/></a>"), "");
  EXPECT_NE(xml_problem("<a><b></a>"), "");
  EXPECT_NE(xml_problem("<a x=1/>"), "");
  EXPECT_NE(xml_problem("<a>&nbsp;</a>"), "");
  EXPECT_NE(xml_problem("<a>1 < 2</a>"), "");
  EXPECT_NE(xml_problem("<a/><b/>"), "");
  EXPECT_NE(xml_problem("<a x=\"1\" x=\"2\"/>"), "");
}

TEST(Shards, BlocksGoRoundRobin) {
  EXPECT_EQ(block_of_slot({0, 1}, 5), 5);
  EXPECT_EQ(block_of_slot({1, 3}, 0), 1);
  EXPECT_EQ(block_of_slot({1, 3}, 2), 7);
  EXPECT_EQ(shard_of_block(7, 3), 1);
  EXPECT_EQ(block_of_slot({0, 2}, std::numeric_limits<std::int64_t>::max()), -1);
}

}  // namespace
}  // namespace infonce::tool_test
