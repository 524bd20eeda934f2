// `infonce-sim reference --case X --json` on every real-trainer case against
// the reference the trainer's own code computed (corpus/real-trainer/ref).
//
// Tolerance (the corpus README asks for rtol 1e-10), scaled by the largest
// reference magnitude so that near-zero gradient entries do not dominate:
//   loss:  |a - b| <= 1e-10 * |ref_loss|      + 1e-14
//   grad:  |a - b| <= 1e-10 * max|ref_grad|   + 1e-14   for every entry
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/cli/cli_runner.hpp"

namespace infonce::cli_test {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr double kRtol = 1e-10;
constexpr double kAtol = 1e-14;

fs::path corpus() {
  return source_dir() / "corpus/real-trainer";
}

// "w2d2-000" for every cases/w2d2-000-fixed.json, sorted.
std::vector<std::string> fixed_case_names() {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(corpus() / "cases")) {
    const std::string file = entry.path().filename().string();
    const std::string suffix = "-fixed.json";
    if (file.ends_with(suffix)) names.push_back(file.substr(0, file.size() - suffix.size()));
  }
  std::sort(names.begin(), names.end());
  return names;
}

Json read_json(const fs::path& path) {
  std::ifstream in(path);
  return Json::parse(in);
}

struct Errors {
  double loss_rel = 0;  // |a - b| / |ref_loss|
  double grad_rel = 0;  // max |a - b| / max |ref_grad|
};

// Runs the reference command on NAME-fixed.json and checks it against ref/NAME.json.
Errors check_reference(const std::string& name) {
  const fs::path case_file = corpus() / "cases" / (name + "-fixed.json");
  const CliResult result = run_infonce_sim({"reference", "--case", case_file.string(), "--json"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.err, "");
  EXPECT_EQ(lines_of(result.out).size(), 1u) << "one line of JSON";
  const Json got = Json::parse(result.out);
  const Json ref = read_json(corpus() / "ref" / (name + ".json"));

  Errors errors;
  const double ref_loss = ref.at("ref_loss").get<double>();
  const double loss = got.at("loss").get<double>();
  EXPECT_LE(std::abs(loss - ref_loss), kRtol * std::abs(ref_loss) + kAtol)
      << "loss " << loss << " vs " << ref_loss;
  errors.loss_rel = std::abs(loss - ref_loss) / std::abs(ref_loss);

  const Json& ref_grad = ref.at("ref_grad");
  const Json& grad = got.at("grad");
  EXPECT_EQ(grad.size(), ref_grad.size());
  double scale = 0;
  for (const auto& row : ref_grad) {
    for (const auto& value : row) scale = std::max(scale, std::abs(value.get<double>()));
  }
  double max_diff = 0;
  for (std::size_t r = 0; r < std::min(grad.size(), ref_grad.size()); ++r) {
    EXPECT_EQ(grad[r].size(), ref_grad[r].size());
    for (std::size_t j = 0; j < std::min(grad[r].size(), ref_grad[r].size()); ++j) {
      const double diff = std::abs(grad[r][j].get<double>() - ref_grad[r][j].get<double>());
      EXPECT_LE(diff, kRtol * scale + kAtol) << "grad[" << r << "][" << j << "]";
      max_diff = std::max(max_diff, diff);
    }
  }
  errors.grad_rel = max_diff / scale;
  return errors;
}

class RealTrainerReference : public ::testing::TestWithParam<std::string> {};

TEST_P(RealTrainerReference, MatchesTheTrainersReference) {
  check_reference(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Corpus, RealTrainerReference, ::testing::ValuesIn(fixed_case_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(RealTrainerCorpus, WorstErrorOverEveryCase) {
  const auto names = fixed_case_names();
  ASSERT_EQ(names.size(), 40u);
  Errors worst;
  std::string worst_loss_case, worst_grad_case;
  for (const std::string& name : names) {
    const Errors errors = check_reference(name);
    if (errors.loss_rel >= worst.loss_rel) worst_loss_case = name;
    if (errors.grad_rel >= worst.grad_rel) worst_grad_case = name;
    worst.loss_rel = std::max(worst.loss_rel, errors.loss_rel);
    worst.grad_rel = std::max(worst.grad_rel, errors.grad_rel);
  }
  std::printf("worst relative error over %zu real-trainer cases: loss %.3e (%s), grad %.3e (%s)\n",
              names.size(), worst.loss_rel, worst_loss_case.c_str(), worst.grad_rel,
              worst_grad_case.c_str());
  RecordProperty("worst_loss_rel_err", std::to_string(worst.loss_rel));
  RecordProperty("worst_grad_rel_err", std::to_string(worst.grad_rel));
  EXPECT_LE(worst.loss_rel, kRtol);
  EXPECT_LE(worst.grad_rel, kRtol);
}

// The reference does not depend on `compensate` (nor on `expect`): the
// before-the-fix file of each pair prints the very same bytes.
TEST(RealTrainerCorpus, PrefixAndFixedCasesShareTheirReference) {
  for (const std::string& name : fixed_case_names()) {
    SCOPED_TRACE(name);
    const auto fixed = run_infonce_sim(
        {"reference", "--json", "--case", (corpus() / "cases" / (name + "-fixed.json")).string()});
    const auto prefix = run_infonce_sim(
        {"reference", "--json", "--case", (corpus() / "cases" / (name + "-prefix.json")).string()});
    EXPECT_EQ(prefix.exit_code, 0) << prefix.err;
    EXPECT_EQ(prefix.out, fixed.out);
  }
}

}  // namespace
}  // namespace infonce::cli_test
