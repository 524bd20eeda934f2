// The oracle's derived backward (cross_entropy_backward, encoder_backward)
// against forward-mode AutoDiff of its own forward (objective_value), on
// random descriptions over every setting.
#include <algorithm>

#include <gtest/gtest.h>
#include <Eigen/Core>
#include <unsupported/Eigen/AutoDiff>

#include "oracle/objective.hpp"
#include "tests/oracle/random_description.hpp"

namespace infonce::oracle {
namespace {

using Derivatives = Eigen::Matrix<Real, Eigen::Dynamic, 1>;
using Dual = Eigen::AutoDiffScalar<Derivatives>;

struct AutoDiffResult {
  Real loss;
  RealRows grad;
};

AutoDiffResult autodiff(const Description& d) {
  const Eigen::Index rows = d.weight.rows(), cols = d.weight.cols();
  Rows<Dual> weight(rows, cols);
  for (Eigen::Index i = 0; i < rows; ++i) {
    for (Eigen::Index j = 0; j < cols; ++j) weight(i, j) = Dual(d.weight(i, j), rows * cols, i * cols + j);
  }
  const Dual value = objective_value(d, objective_terms(d), weight);
  AutoDiffResult out{value.value(), RealRows(rows, cols)};
  for (Eigen::Index i = 0; i < rows; ++i) {
    for (Eigen::Index j = 0; j < cols; ++j) out.grad(i, j) = value.derivatives()(i * cols + j);
  }
  return out;
}

TEST(OracleAutoDiff, DerivedBackwardEqualsAutoDiffOnRandomCases) {
  Real worst = 0;
  for (std::uint64_t seed = 1; seed <= 400; ++seed) {
    SCOPED_TRACE(seed);
    const Description d = testing::random_description(seed);
    const Result derived = evaluate(d);
    const AutoDiffResult reference = autodiff(d);
    // Inputs are O(1): an absolute floor of 1 keeps gradients that vanish
    // exactly (D = 1 normalised: every embedding is +-1) from dividing by 0.
    const Real scale = 1 + derived.grad_magnitude.maxCoeff();
    const Real error = (derived.grad - reference.grad).cwiseAbs().maxCoeff() / scale;
    EXPECT_LE(error, 1e-16L);
    EXPECT_NEAR(static_cast<double>(derived.loss), static_cast<double>(reference.loss),
                1e-15 * std::abs(static_cast<double>(reference.loss)));
    worst = std::max(worst, error);
  }
  std::printf("derived backward vs AutoDiff, 400 cases: worst error %.3Le of 1 + the summand scale\n",
              worst);
}

// A crude check that the AutoDiff harness differentiates at all: the derivative
// of the objective along W(0,0) matches a central difference in long double.
TEST(OracleAutoDiff, AutoDiffMatchesACentralDifference) {
  const Description d = testing::random_description(7);
  const std::vector<LossTerm> terms = objective_terms(d);
  const Real h = 1e-7L;
  RealRows plus = d.weight, minus = d.weight;
  plus(0, 0) += h;
  minus(0, 0) -= h;
  const Real difference =
      (objective_value(d, terms, plus) - objective_value(d, terms, minus)) / (2 * h);
  const Real derivative = autodiff(d).grad(0, 0);
  EXPECT_NEAR(static_cast<double>(difference), static_cast<double>(derivative), 1e-8);
}

}  // namespace
}  // namespace infonce::oracle
