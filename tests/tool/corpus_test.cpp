// The corpus: the repository's passes, covers every axis and every known
// bug, and `corpus replay` fails each kind of entry that no longer holds.
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "casefile/case_json.hpp"
#include "properties/campaign.hpp"
#include "step/mutants.hpp"
#include "tests/cli/cli_runner.hpp"

namespace infonce::tool_test {
namespace {

namespace fs = std::filesystem;
using cli_test::CliResult;
using cli_test::fresh_work_dir;
using cli_test::lines_of;
using cli_test::run_infonce_sim;
using cli_test::source_dir;
using cli_test::write_text_file;
using Json = nlohmann::ordered_json;

std::vector<fs::path> case_files(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() == ".json") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

Json read_json(const fs::path& path) {
  std::ifstream in(path);
  return Json::parse(in);
}

// The spec a case file was built from, as far as coverage needs it.
properties::CaseSpec spec_of(const Case& c) {
  properties::CaseSpec spec;
  spec.world = c.mesh.world;
  spec.dp = c.mesh.dp;
  spec.negatives.clear();
  for (std::int32_t m = 0; m < c.micro_steps_run(); ++m) {
    auto& shards = spec.negatives.emplace_back();
    for (const auto& shard : c.batches[static_cast<std::size_t>(m)]) {
      shards.push_back(shard.negative_counts);
    }
  }
  spec.idle_steps = c.accumulation_steps - c.micro_steps_run();
  spec.compensate = c.compensate;
  spec.per_rank_rng = c.rng_mode == RngMode::per_rank;
  spec.record_draws = c.padding_draws.has_value();
  spec.accumulation_normalize = c.accumulation_normalize;
  spec.feature_dim = c.feature_dim();
  spec.embedding_dim = c.embedding_dim();
  spec.normalize = c.encoder_normalize;
  spec.use_batch = c.loss.use_batch;
  spec.hard_negatives = c.loss.hard_negatives.value_or(0);
  spec.mask_fake_negative = c.loss.mask_fake_negative;
  spec.fake_neg_margin = c.loss.fake_neg_margin;
  spec.include_qq = c.loss.include_qq;
  spec.include_dd = c.loss.include_dd;
  spec.temperature = c.loss.temperature;
  spec.reduction = c.reduction;
  spec.gather = c.gather;
  spec.scalar = c.scalar;
  return spec;
}

std::set<std::pair<std::string, std::string>> values_of(const properties::Coverage& coverage) {
  std::set<std::pair<std::string, std::string>> values;
  for (const auto& [axis, counts] : coverage) {
    for (const auto& [value, count] : counts) values.insert({axis, value});
  }
  return values;
}

TEST(Corpus, TheRepositoryCorpusPasses) {
  const CliResult result =
      run_infonce_sim({"corpus", "replay", (source_dir() / "corpus").string()});
  EXPECT_EQ(result.exit_code, 0) << result.out;
  const auto lines = lines_of(result.out);
  ASSERT_FALSE(lines.empty());
  EXPECT_NE(lines.back().find(" passed, 0 failed"), std::string::npos) << lines.back();
  std::int64_t mutants = 0, axes = 0, trainer = 0;
  for (const std::string& line : lines) {
    mutants += line.find("/corpus/mutants/") != std::string::npos;
    axes += line.find("/corpus/axes/") != std::string::npos;
    trainer += line.find("/corpus/real-trainer/") != std::string::npos;
  }
  EXPECT_EQ(mutants, static_cast<std::int64_t>(case_files(source_dir() / "corpus/mutants").size()));
  EXPECT_GE(axes, 5);
  EXPECT_EQ(trainer, 80);
}

TEST(Corpus, AxisCasesCoverEveryAxisValueTheGeneratorProduces) {
  properties::Coverage corpus;
  for (const fs::path& file : case_files(source_dir() / "corpus/axes")) {
    const Case c = read_case_file(file);
    EXPECT_TRUE(c.expect.has_value()) << file << ": the axis corpus records a baseline";
    properties::add_coverage(spec_of(c), corpus);
  }
  properties::Coverage generated;
  for (std::int64_t i = 0; i < 2000; ++i) {
    properties::add_coverage(properties::generate_spec(1, i, properties::default_limits()),
                             generated);
  }
  const auto have = values_of(corpus);
  // How a case is run, and the style its features were drawn in, are not
  // recorded in its file, so no file can show them.
  const std::set<std::string> not_in_files = {"features", "reduction_order", "schedule_seed"};
  for (const auto& value : values_of(generated)) {
    if (not_in_files.count(value.first)) continue;
    EXPECT_TRUE(have.count(value)) << value.first << " = " << value.second << " has no case";
  }
}

TEST(Corpus, EveryKnownBugHasAMutantCase) {
  std::set<std::string> guarded;
  for (const fs::path& file : case_files(source_dir() / "corpus/mutants")) {
    const Case c = read_case_file(file);
    ASSERT_TRUE(c.found && c.found->mutant) << file;
    guarded.insert(*c.found->mutant);
  }
  for (const step::Mutant& mutant : step::mutant_registry()) {
    EXPECT_TRUE(guarded.count(std::string(mutant.name))) << mutant.name;
  }
}

// A file for each way an entry can stop holding, and one for each way it holds.
TEST(Corpus, ReplayFailsEntriesThatNoLongerHold) {
  const fs::path dir = fresh_work_dir("corpus-tampered") / "corpus";
  fs::create_directories(dir / "nested");
  const fs::path mutants = source_dir() / "corpus/mutants";
  Json mutant_case;
  for (const fs::path& file : case_files(mutants)) {
    const Json json = read_json(file);
    if (json["found"]["mutant"] == "ga-twice") mutant_case = json;
  }
  ASSERT_FALSE(mutant_case.is_null());
  auto write = [&](const std::string& name, const Json& json) {
    write_text_file(dir / name, json.dump(1));
  };
  write("a-mutant-holds.json", mutant_case);
  Json not_caught = mutant_case;
  // ga-twice's case reduces by mean: applying compensation under a sum cannot show.
  not_caught["found"]["mutant"] = "compensate-under-sum";
  write("b-mutant-no-longer-caught.json", not_caught);
  Json fixed_bug = mutant_case;
  fixed_bug["found"]["mutant"] = nullptr;  // the correct step passes it
  write("nested/c-bug-stays-fixed.json", fixed_bug);
  Json wrong_expect = read_json(case_files(source_dir() / "corpus/axes").front());
  wrong_expect["expect"]["loss"] = wrong_expect["expect"]["loss"].get<double>() + 1;
  write("d-expect-not-met.json", wrong_expect);
  Json before_fix = mutant_case;
  before_fix.erase("found");
  before_fix["compensate"] = false;
  write("e-run-fails.json", before_fix);  // ga-twice's case has P = 1: compensation is moot
  Json broken = mutant_case;
  broken["mesh"]["dp"] = 3;
  write("f-invalid.json", broken);
  write_text_file(dir / "g-not-a-case.json", R"({"ref_loss": 1.0})");
  write_text_file(dir / "notes.txt", "not JSON, not a case");

  const CliResult result = run_infonce_sim({"corpus", "replay", dir.string()});
  EXPECT_EQ(result.exit_code, 1) << result.err;
  const auto lines = lines_of(result.out);
  ASSERT_EQ(lines.size(), 7u) << result.out;
  const std::string d = dir.string() + "/";
  EXPECT_EQ(lines[0], "PASS  " + d +
                          "a-mutant-holds.json  mutant ga-twice still caught by "
                          "gradient-matches-reference; the correct step passes");
  EXPECT_TRUE(lines[1].starts_with("FAIL  " + d +
                                   "b-mutant-no-longer-caught.json  mutant "
                                   "compensate-under-sum is no longer caught by "
                                   "gradient-matches-reference"))
      << lines[1];
  EXPECT_TRUE(lines[2].starts_with("FAIL  " + d + "d-expect-not-met.json  expect NOT met"))
      << lines[2];
  EXPECT_TRUE(lines[3].starts_with("PASS  " + d + "e-run-fails.json  run passes")) << lines[3];
  EXPECT_TRUE(lines[4].starts_with("FAIL  " + d + "f-invalid.json  invalid: ")) << lines[4];
  EXPECT_NE(lines[4].find("mesh.dp"), std::string::npos) << lines[4];
  EXPECT_TRUE(lines[5].starts_with("PASS  " + d +
                                   "nested/c-bug-stays-fixed.json  the bug found "
                                   "at seed 1"))
      << lines[5];
  EXPECT_EQ(lines[6], "3 passed, 3 failed (1 JSON files without \"format\" skipped)");
}

TEST(Corpus, ACaseBeforeTheFixFailsRun) {
  const fs::path dir = fresh_work_dir("corpus-before-fix");
  Json before_fix;
  for (const fs::path& file : case_files(source_dir() / "corpus/mutants")) {
    const Json json = read_json(file);
    if (json["found"]["mutant"] == "no-compensation") before_fix = json;  // P = 2, use_batch
  }
  ASSERT_FALSE(before_fix.is_null());
  before_fix.erase("found");
  before_fix["compensate"] = false;
  write_text_file(dir / "before-fix.json", before_fix.dump());
  const CliResult result = run_infonce_sim({"corpus", "replay", dir.string()});
  EXPECT_EQ(result.exit_code, 1);
  // The line names the check that failed and its figures.
  EXPECT_NE(result.out.find("run FAILS: gradient (max error "), std::string::npos) << result.out;
  EXPECT_NE(result.out.find(", ratio 0.5)"), std::string::npos) << result.out;
}

// A real-trainer file meets its expect (corpus replay's verdict) while `run`
// fails it on padding: the line says both, so the two views never disagree
// silently.
TEST(Corpus, AnExpectLineNamesTheChecksRunWouldFail) {
  const fs::path dir = fresh_work_dir("corpus-legacy-padding");
  const fs::path source = source_dir() / "corpus/real-trainer/cases/w4d2-000-fixed.json";
  write_text_file(dir / "w4d2-000-fixed.json", read_json(source).dump());
  const CliResult result = run_infonce_sim({"corpus", "replay", dir.string()});
  EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
  const auto lines = lines_of(result.out);
  ASSERT_EQ(lines.size(), 2u) << result.out;
  EXPECT_TRUE(lines[0].starts_with("PASS  " + (dir / "w4d2-000-fixed.json").string() +
                                   "  expect met (loss error "))
      << lines[0];
  EXPECT_NE(lines[0].find("; not judged here, `run` fails: padding (padding drew a group's "
                          "positive as a negative 12 time(s)"),
            std::string::npos)
      << lines[0];
  EXPECT_EQ(lines[1], "1 passed, 0 failed");
  EXPECT_EQ(run_infonce_sim({"run", "--case", source.string()}).exit_code, 1);
}

}  // namespace
}  // namespace infonce::tool_test
