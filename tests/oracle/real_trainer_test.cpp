// The oracle against the 80 results of the real trainer under real PyTorch
// DDP (corpus/real-trainer, also ../shared/cases/real-trainer): rank 0's
// reported loss and the reduced gradient each file's `expect` records, and
// the trainer's own single-process reference (ref/NAME.json) for the fixed
// files. rtol 1e-10 as the corpus README asks, scaled by the largest value.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "casefile/case_json.hpp"
#include "properties/oracle_case.hpp"

namespace infonce::properties {
namespace {

namespace fs = std::filesystem;

constexpr double kRtol = 1e-10;
constexpr double kAtol = 1e-14;

fs::path corpus() { return fs::path(INFONCE_SOURCE_DIR) / "corpus/real-trainer"; }

std::vector<std::string> case_files() {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(corpus() / "cases")) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

double max_abs(const Matrix<double>& m) { return m.cwiseAbs().maxCoeff(); }

// Largest |a - b| relative to max|b|.
double grad_error(const Matrix<double>& a, const Matrix<double>& b) {
  EXPECT_EQ(a.rows(), b.rows());
  EXPECT_EQ(a.cols(), b.cols());
  return max_abs(a - b) / max_abs(b);
}

Matrix<double> json_matrix(const nlohmann::json& rows) {
  Matrix<double> m(rows.size(), rows.at(0).size());
  for (std::size_t r = 0; r < rows.size(); ++r) {
    for (std::size_t c = 0; c < rows[r].size(); ++c) m(r, c) = rows[r][c].get<double>();
  }
  return m;
}

// What DDP reduces to: the objective's gradient, / P before the fix (use_batch, mean).
Matrix<double> expected_ddp_grad(const Case& c, const Matrix<double>& oracle_grad) {
  const bool uncompensated = !c.compensate && c.loss.use_batch && c.mesh.dp > 1;
  return uncompensated ? Matrix<double>(oracle_grad / c.mesh.dp) : oracle_grad;
}

TEST(OracleRealTrainer, ReproducesEveryFileOfTheRealTrainer) {
  const std::vector<std::string> files = case_files();
  ASSERT_EQ(files.size(), 80u);
  double worst_loss = 0, worst_grad = 0, worst_ref = 0;
  int compared_refs = 0;
  for (const std::string& file : files) {
    SCOPED_TRACE(file);
    const Case c = read_case_file(corpus() / "cases" / file);
    ASSERT_TRUE(c.expect.has_value());
    const step::ReferenceValues oracle = oracle_values(c).values;
    const double loss_error = std::abs(oracle.shard_losses[0] - c.expect->loss);
    EXPECT_LE(loss_error, kRtol * std::abs(c.expect->loss) + kAtol);
    worst_loss = std::max(worst_loss, loss_error / std::abs(c.expect->loss));
    const double error = grad_error(expected_ddp_grad(c, oracle.grad), c.expect->grad);
    EXPECT_LE(error, kRtol);
    worst_grad = std::max(worst_grad, error);
    if (file.ends_with("-fixed.json")) {
      std::ifstream in(corpus() / "ref" / (file.substr(0, file.size() - 11) + ".json"));
      const nlohmann::json ref = nlohmann::json::parse(in);
      const double ref_loss = ref.at("ref_loss").get<double>();
      EXPECT_LE(std::abs(oracle.loss - ref_loss), kRtol * std::abs(ref_loss) + kAtol);
      const double ref_error = grad_error(oracle.grad, json_matrix(ref.at("ref_grad")));
      EXPECT_LE(ref_error, kRtol);
      worst_ref = std::max(worst_ref, ref_error);
      ++compared_refs;
    }
  }
  EXPECT_EQ(compared_refs, 40);
  std::printf("oracle vs the real trainer, 80 files: worst loss rel %.3e, DDP grad rel %.3e, "
              "reference grad rel %.3e\n",
              worst_loss, worst_grad, worst_ref);
}

}  // namespace
}  // namespace infonce::properties
