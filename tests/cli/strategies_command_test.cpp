// `infonce-sim strategies` through the binary: the matrix's values at the
// default shape (P = 4, W = 8; expected values derived by hand from the
// table in docs/strategies.md, not from the code), the JSON document, the
// reproduce commands of the cells (each strategy campaign is run and must
// pass: every case as predicted, both parameter groups), each wrong cell's
// shrunk case in each loss family, InfoNCE, CLIP and NT-Xent (its case
// file, replayed, must fail gradient-matches-reference, on the direct
// parameters for a direct cell),
// bad input (exit 2, one line), and the SVG
// against docs/strategies.svg. That comparison is a regression baseline, not
// an independent check: the committed file was made by this command
// (`build/infonce-sim strategies --svg docs/strategies.svg`); when the
// drawing changes on purpose, re-make it with that command.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/cli/cli_runner.hpp"
#include "tests/properties/budget.hpp"

namespace infonce::cli_test {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << "cannot read " << path;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The matrix line of a strategy point, split at runs of two or more spaces.
std::vector<std::string> matrix_row(const std::string& out, const std::string& point) {
  for (const std::string& line : lines_of(out)) {
    if (!line.starts_with(point + " ")) continue;
    std::vector<std::string> cells;
    std::size_t at = 0;
    while (at < line.size()) {
      const std::size_t gap = line.find("  ", at);
      cells.push_back(line.substr(at, gap - at));
      if (gap == std::string::npos) break;
      at = line.find_first_not_of(' ', gap);
    }
    return cells;
  }
  return {};
}

TEST(StrategiesCommand, PrintsThePredictedMatrixAtTheDefaultShape) {
  const CliResult result = run_infonce_sim({"strategies"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.err, "");
  EXPECT_NE(result.out.find("P = 4 data-parallel shards, W = 8 ranks"), std::string::npos);
  using Row = std::vector<std::string>;
  EXPECT_EQ(matrix_row(result.out, "detached-own-live/global/scale-1/mean"),
            (Row{"detached-own-live/global/scale-1/mean", "ratio 0.25", "correct"}));
  EXPECT_EQ(matrix_row(result.out, "detached-own-live/global/scale-P/mean"),
            (Row{"detached-own-live/global/scale-P/mean", "correct", "ratio 4"}));
  EXPECT_EQ(matrix_row(result.out, "detached-own-live/global/scale-W/mean"),
            (Row{"detached-own-live/global/scale-W/mean", "ratio 2", "ratio 8"}));
  EXPECT_EQ(matrix_row(result.out, "detached/global/scale-1/mean"),
            (Row{"detached/global/scale-1/mean", "ratio 0", "correct"}));
  EXPECT_EQ(matrix_row(result.out, "detached/local/scale-1/mean"),
            (Row{"detached/local/scale-1/mean", "no single ratio (dropped terms)",
                 "correct [equal batches]"}));
  EXPECT_EQ(
      matrix_row(result.out, "autograd/local/scale-1/mean"),
      (Row{"autograd/local/scale-1/mean", "correct [equal batches]", "correct [equal batches]"}));
  EXPECT_EQ(matrix_row(result.out, "autograd/global/scale-W/sum"),
            (Row{"autograd/global/scale-W/sum", "ratio 32", "ratio 32"}));
}

TEST(StrategiesCommand, ListsTheSeventeenProjectConfigurationsWithTheirPoints) {
  const CliResult result = run_infonce_sim({"strategies", "--dp", "2", "--world", "2"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  // open_clip's default at P = 2: towers 1/2, logit scale correct.
  EXPECT_NE(result.out.find(" 3   mlfoundations/open_clip: ClipLoss() default\n"
                            "     src/open_clip/loss.py @ 89fb801f (ClipLoss)\n"
                            "     detached-own-live/global/scale-1/mean  encoders: ratio 0.5  "
                            "direct: log logit scale: correct\n"),
            std::string::npos)
      << result.out;
  // Megatron ICT: unconfirmed (dagger), the seed's fix.
  EXPECT_NE(result.out.find("17 † NVIDIA/Megatron-LM: "), std::string::npos);
  EXPECT_NE(result.out.find("     detached-own-live/global/scale-P/mean  encoders: correct  "
                            "direct: none (a learnable one: ratio 2)\n"),
            std::string::npos);
}

ordered_json strategies_json(const std::vector<std::string>& extra, const std::string& name) {
  const fs::path file = fresh_work_dir(name) / "strategies.json";
  std::vector<std::string> args = {"strategies", "--json", file.string()};
  args.insert(args.end(), extra.begin(), extra.end());
  const CliResult result = run_infonce_sim(args);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  return ordered_json::parse(read_file(file));
}

TEST(StrategiesCommand, JsonHasEveryCellInAStableOrderWithItsReproduceCommand) {
  const ordered_json doc = strategies_json({"--dp", "3", "--world", "6"}, "strategies-json");
  std::vector<std::string> keys;
  for (const auto& [key, value] : doc.items()) keys.push_back(key);
  EXPECT_EQ(keys, (std::vector<std::string>{"command", "dp", "world", "prediction_check", "matrix",
                                            "field"}));
  EXPECT_EQ(doc["dp"], 3);
  EXPECT_EQ(doc["world"], 6);
  ASSERT_EQ(doc["matrix"].size(), 36u);
  ASSERT_EQ(doc["field"].size(), 18u);
  const ordered_json& first = doc["matrix"][0];
  EXPECT_EQ(first["strategy"], "detached-own-live/global/scale-1/mean");
  const ordered_json& encoders = first["cells"]["encoders"];
  EXPECT_EQ(encoders["verdict"], "ratio");
  EXPECT_DOUBLE_EQ(encoders["ratio"].get<double>(), 1.0 / 3.0);
  EXPECT_EQ(encoders["reproduce"],
            "infonce-sim check --strategies detached-own-live/global/scale-1/mean --seed 1 "
            "--cases 1000");
  // Its shrunk case: two ranks, two shards, one micro-step; the fix missing
  // leaves 1/P of the gradient there.
  const ordered_json& witness = encoders["witness"];
  EXPECT_TRUE(witness["shrunk"].get<std::string>().starts_with("W=2 P=2 A=1 ")) << witness;
  EXPECT_EQ(witness["predicted"], "ratio 0.5");
  EXPECT_TRUE(witness["observed"].get<std::string>().starts_with("ratio 0.5 ")) << witness;
  // And the CLIP loss's, described as CLIP reads the spec (pairs per shard).
  const ordered_json& clip = encoders["clip_witness"];
  EXPECT_TRUE(clip["shrunk"].get<std::string>().starts_with("W=2 P=2 A=1 pairs=")) << clip;
  EXPECT_EQ(clip["predicted"], "ratio 0.5");
  EXPECT_TRUE(clip["observed"].get<std::string>().starts_with("ratio 0.5 ")) << clip;
  // And NT-Xent's, described as NT-Xent reads the spec (samples per shard).
  const ordered_json& ntxent = encoders["ntxent_witness"];
  EXPECT_TRUE(ntxent["shrunk"].get<std::string>().starts_with("W=2 P=2 A=1 samples=")) << ntxent;
  EXPECT_EQ(ntxent["predicted"], "ratio 0.5");
  EXPECT_TRUE(ntxent["observed"].get<std::string>().starts_with("ratio 0.5 ")) << ntxent;
  // Without a scale the direct parameters are right: no witness.
  const ordered_json& direct = first["cells"]["direct"];
  EXPECT_EQ(direct["verdict"], "correct");
  EXPECT_EQ(direct["reproduce"], encoders["reproduce"]);
  EXPECT_TRUE(direct["witness"].is_null());
  EXPECT_TRUE(direct["clip_witness"].is_null());
  EXPECT_TRUE(direct["ntxent_witness"].is_null());
  // The seed's fix scales the backward by P, which is right for the encoders
  // and P x for 1/T and CLIP's logit scale (docs/strategies.md): its direct
  // witnesses show 2 at P = 2.
  const ordered_json& fix = doc["matrix"][2]["cells"]["direct"];
  EXPECT_EQ(fix["verdict"], "ratio");
  EXPECT_EQ(fix["ratio"], 3.0);
  EXPECT_EQ(fix["witness"]["predicted"], "ratio 2");
  EXPECT_TRUE(
      fix["witness"]["observed"].get<std::string>().starts_with("inverse_temperature: ratio 2 "))
      << fix["witness"];
  EXPECT_TRUE(
      fix["clip_witness"]["observed"].get<std::string>().starts_with("log_logit_scale: ratio 2 "))
      << fix["clip_witness"];
  EXPECT_TRUE(fix["ntxent_witness"]["observed"].get<std::string>().starts_with(
      "inverse_temperature: ratio 2 "))
      << fix["ntxent_witness"];
  // A dropped-terms cell: no ratio, its cause, not an equal-batches verdict.
  const ordered_json& dropped = doc["matrix"][18]["cells"]["encoders"];
  EXPECT_EQ(doc["matrix"][18]["strategy"], "detached/local/scale-1/mean");
  EXPECT_EQ(dropped["verdict"], "no-single-ratio");
  EXPECT_TRUE(dropped["ratio"].is_null());
  EXPECT_EQ(dropped["cause"], "dropped terms");
  EXPECT_EQ(dropped["equal_batches_only"], false);
  // Its shrunk case is a counterexample: no multiple of the reference.
  EXPECT_EQ(dropped["witness"]["predicted"], "no single ratio (dropped terms)");
  EXPECT_TRUE(dropped["witness"]["observed"].get<std::string>().starts_with("best ratio "))
      << dropped["witness"];
  // NT-Xent drops the same cross-rank terms under a local loss.
  EXPECT_EQ(dropped["ntxent_witness"]["predicted"], "no single ratio (dropped terms)");
  EXPECT_TRUE(dropped["ntxent_witness"]["observed"].get<std::string>().starts_with("best ratio "))
      << dropped["ntxent_witness"];
  // An equal-batches verdict and what unequal batches give.
  const ordered_json& local = doc["matrix"][30]["cells"]["encoders"];
  EXPECT_EQ(doc["matrix"][30]["strategy"], "autograd/local/scale-1/mean");
  EXPECT_EQ(local["verdict"], "correct");
  EXPECT_EQ(local["equal_batches_only"], true);
  EXPECT_EQ(local["with_unequal_batches"], "no single ratio (unequal batches)");
  // Correct with equal batches only: its shrunk case has unequal ones.
  EXPECT_EQ(local["witness"]["predicted"], "no single ratio (unequal batches)");
  // The direct group is one number: its witness is a ratio other than the
  // equal-batch 1.
  const ordered_json& local_direct = doc["matrix"][30]["cells"]["direct"];
  EXPECT_EQ(local_direct["witness"]["predicted"], "no single ratio (unequal batches)");
  EXPECT_TRUE(local_direct["witness"]["observed"].get<std::string>().ends_with(
      ", not the equal-batch ratio 1"))
      << local_direct["witness"];
  // A plainly correct cell has none: the seed's fix.
  EXPECT_EQ(doc["matrix"][2]["strategy"], "detached-own-live/global/scale-P/mean");
  EXPECT_TRUE(doc["matrix"][2]["cells"]["encoders"]["witness"].is_null());
  // tevatron at W = 2P gathers over the world (issue 29, finding 8): its
  // encoders' gradient is correct, not W/P = 2 as the dp point predicted.
  EXPECT_EQ(doc["field"][9]["project"], "texttron/tevatron");
  EXPECT_EQ(doc["field"][9]["strategy"], "detached-own-live/global/scale-W/mean/world");
  EXPECT_EQ(doc["field"][9]["encoders"]["verdict"], "correct");
  EXPECT_EQ(doc["field"][9]["encoders"]["ratio"], 1.0);
  EXPECT_EQ(doc["field"][9]["unconfirmed"], false);
}

TEST(StrategiesCommand, JsonBytesAreTheSameOnEveryRun) {
  const fs::path a = fresh_work_dir("strategies-json-a") / "a.json";
  const fs::path b = fresh_work_dir("strategies-json-b") / "b.json";
  ASSERT_EQ(run_infonce_sim({"strategies", "--json", a.string()}).exit_code, 0);
  ASSERT_EQ(run_infonce_sim({"strategies", "--json", b.string()}).exit_code, 0);
  EXPECT_EQ(read_file(a), read_file(b));
}

// Every cell's strategy campaign passes: each case at that point is as
// predicted for its own P and W, for both parameter groups (a point's two
// cells share the campaign).
TEST(StrategiesCommand, TheRankProgramReproduceCommandsPass) {
  const ordered_json doc = strategies_json({}, "strategies-reproduce");
  int run = 0;
  for (const ordered_json& point : doc["matrix"]) {
    for (const auto& [group, cell] : point["cells"].items()) {
      EXPECT_EQ(cell["reproduce"], point["cells"]["encoders"]["reproduce"]) << point["strategy"];
      if (group != "encoders") continue;
      std::istringstream words(cell["reproduce"].get<std::string>());
      std::string word;
      words >> word;
      ASSERT_EQ(word, "infonce-sim");
      std::vector<std::string> args;
      while (words >> word) args.push_back(word);
      // Under the sanitizers a twentieth of the cases: the same code paths.
      const auto cases = std::find(args.begin(), args.end(), "--cases");
      ASSERT_NE(cases, args.end());
      ASSERT_EQ(*(cases + 1), "1000");
      *(cases + 1) = std::to_string(properties::scaled_budget(1000));
      const CliResult result = run_infonce_sim(args);
      EXPECT_EQ(result.exit_code, 0) << point["strategy"] << ": " << cell["reproduce"] << "\n"
                                     << result.out << result.err;
      EXPECT_NE(result.out.find("PASS: every observed outcome is the predicted one"),
                std::string::npos)
          << result.out;
      ++run;
    }
  }
  EXPECT_EQ(run, 36);
}

// Every wrong cell (and every cell correct with equal batches only) has a
// shrunk case in each loss family (InfoNCE, CLIP, NT-Xent, SigLIP); --cases-dir
// writes it, and `replay` of the file fails gradient-matches-reference: the
// step's gradient is not the full batch's (a direct cell's: on the direct
// parameters).
TEST(StrategiesCommand, EveryWrongCellsShrunkCaseReplaysAsAFailure) {
  const fs::path dir = fresh_work_dir("strategies-witnesses") / "cases";
  const CliResult listed = run_infonce_sim({"strategies", "--cases-dir", dir.string()});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  int replayed = 0;
  int direct = 0;
  int ntxent = 0;
  int siglip = 0;
  for (const std::string& line : lines_of(listed.out)) {
    const std::string prefix = "      replay: infonce-sim replay ";
    if (!line.starts_with(prefix)) continue;
    const std::string file = line.substr(prefix.size());
    ASSERT_TRUE(fs::exists(file)) << file;
    const CliResult result = run_infonce_sim({"replay", file});
    EXPECT_EQ(result.exit_code, 1) << file << "\n" << result.out << result.err;
    EXPECT_NE(result.out.find("gradient-matches-reference: "), std::string::npos) << file << "\n"
                                                                                  << result.out;
    if (file.ends_with("-direct.json")) {
      EXPECT_NE(result.out.find("direct parameters ("), std::string::npos) << file << "\n"
                                                                           << result.out;
      ++direct;
    }
    ntxent += file.ends_with("-ntxent.json") || file.ends_with("-ntxent-direct.json");
    siglip += file.ends_with("-siglip.json") || file.ends_with("-siglip-direct.json");
    ++replayed;
  }
  // Per group and family (4 families), 36 points less the three plainly
  // correct ones (docs/strategies.md): the encoders' seed's fix, unscaled sum
  // and autograd global mean; the direct group's three unscaled global means.
  EXPECT_EQ(replayed, 8 * 33);
  EXPECT_EQ(direct, 4 * 33);
  EXPECT_EQ(ntxent, 2 * 33);
  EXPECT_EQ(siglip, 2 * 33);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 8 * 33);
}

TEST(StrategiesCommand, TheSvgIsTheCommittedDocsPicture) {
  const fs::path file = fresh_work_dir("strategies-svg") / "strategies.svg";
  const CliResult result = run_infonce_sim({"strategies", "--svg", file.string()});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::string svg = read_file(file);
  EXPECT_TRUE(svg.starts_with("<svg")) << svg.substr(0, 80);
  EXPECT_NE(svg.find("detached/local/scale-1/mean"), std::string::npos);
  // Regression baseline (see the top of this file).
  EXPECT_EQ(svg, read_file(source_dir() / "docs" / "strategies.svg"))
      << "re-make it: build/infonce-sim strategies --svg docs/strategies.svg";
}

// Exit 2, nothing on stdout, one line naming the problem.
void expect_bad_input(const std::vector<std::string>& args, const std::string& fragment) {
  const CliResult result = run_infonce_sim(args);
  EXPECT_EQ(result.signal, 0);
  EXPECT_EQ(result.exit_code, 2) << result.err;
  EXPECT_EQ(result.out, "");
  EXPECT_EQ(lines_of(result.err).size(), 1u) << result.err;
  EXPECT_TRUE(result.err.starts_with("infonce-sim: error: strategies: ")) << result.err;
  EXPECT_NE(result.err.find(fragment), std::string::npos) << result.err;
}

TEST(StrategiesCommand, BadInputGivesOneLineAndExitTwo) {
  const fs::path dir = fresh_work_dir("strategies-bad");
  const fs::path plain_file = write_text_file(dir / "plain.txt", "x");
  expect_bad_input({"strategies", "--dp", "4", "--world", "6"},
                   "--world 6 is not a multiple of --dp 4");
  expect_bad_input({"strategies", "--dp", "4", "--world", "2"},
                   "--world 2 is not a multiple of --dp 4");
  expect_bad_input({"strategies", "--dp", "0"}, "--dp must be at least 1");
  expect_bad_input({"strategies", "--dp=-1"}, "--dp must be a whole number");
  expect_bad_input({"strategies", "--world", "two"}, "--world must be a whole number");
  expect_bad_input({"strategies", "--json", (dir / "no-such-dir" / "m.json").string()},
                   "no directory");
  expect_bad_input({"strategies", "--svg", dir.string()}, "is a directory");
  expect_bad_input({"strategies", "--svg", (plain_file / "m.svg").string()}, "no directory");
  expect_bad_input({"strategies", "--cases-dir", plain_file.string()}, "is not a directory");
  EXPECT_FALSE(fs::exists(dir / "no-such-dir"));
}

}  // namespace
}  // namespace infonce::cli_test
