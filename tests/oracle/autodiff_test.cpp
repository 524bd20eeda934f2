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
  Real grad_inverse_temperature;  // d objective / d tau, tau = 1 / T
};

// Differentiates in every entry of W and in tau at once: D F + 1 derivatives,
// tau the last.
AutoDiffResult autodiff(const Description& d) {
  const Eigen::Index rows = d.weight.rows(), cols = d.weight.cols();
  const Eigen::Index count = rows * cols + 1;
  Rows<Dual> weight(rows, cols);
  for (Eigen::Index i = 0; i < rows; ++i) {
    for (Eigen::Index j = 0; j < cols; ++j)
      weight(i, j) = Dual(d.weight(i, j), count, i * cols + j);
  }
  const Dual tau(1 / d.loss.temperature, count, rows * cols);
  const Dual value = objective_value(d, objective_terms(d), weight, tau);
  AutoDiffResult out{value.value(), RealRows(rows, cols), value.derivatives()(rows * cols)};
  for (Eigen::Index i = 0; i < rows; ++i) {
    for (Eigen::Index j = 0; j < cols; ++j) out.grad(i, j) = value.derivatives()(i * cols + j);
  }
  return out;
}

TEST(OracleAutoDiff, DerivedBackwardEqualsAutoDiffOnRandomCases) {
  Real worst = 0, worst_tau = 0;
  for (std::uint64_t seed = 1; seed <= 400; ++seed) {
    SCOPED_TRACE(seed);
    Description d = testing::random_description(seed);
    d.learnable_temperature = true;
    const Result derived = evaluate(d);
    const AutoDiffResult reference = autodiff(d);
    // Inputs are O(1): an absolute floor of 1 keeps gradients that vanish
    // exactly (D = 1 normalised: every embedding is +-1) from dividing by 0.
    const Real scale = 1 + derived.grad_magnitude.maxCoeff();
    const Real error = (derived.grad - reference.grad).cwiseAbs().maxCoeff() / scale;
    EXPECT_LE(error, 1e-16L);
    EXPECT_NEAR(static_cast<double>(derived.loss), static_cast<double>(reference.loss),
                1e-15 * std::abs(static_cast<double>(reference.loss)));
    const Real tau_error =
        std::abs(derived.grad_inverse_temperature - reference.grad_inverse_temperature) /
        (1 + derived.grad_inverse_temperature_magnitude);
    EXPECT_LE(tau_error, 1e-16L);
    // The terms' bound takes softmax - onehot apart: never below their |sum|.
    EXPECT_LE(derived.grad_inverse_temperature_magnitude,
              derived.grad_inverse_temperature_bound * (1 + 1e-15L));
    worst = std::max(worst, error);
    worst_tau = std::max(worst_tau, tau_error);
  }
  std::printf(
      "derived backward vs AutoDiff, 400 cases: worst error %.3Le of 1 + the summand scale\n",
      worst);
  std::printf(
      "d objective / d tau vs AutoDiff, 400 cases: worst error %.3Le of 1 + its magnitude\n",
      worst_tau);
}

// tau is a parameter only when it is learnable: otherwise its gradient is 0
// and nothing else changes.
TEST(OracleAutoDiff, AFixedTemperatureHasNoGradientAndTheSameResult) {
  for (std::uint64_t seed = 1; seed <= 50; ++seed) {
    SCOPED_TRACE(seed);
    Description d = testing::random_description(seed);
    const Result fixed = evaluate(d);
    d.learnable_temperature = true;
    const Result learnable = evaluate(d);
    EXPECT_EQ(fixed.grad_inverse_temperature, 0);
    EXPECT_EQ(fixed.grad_inverse_temperature_magnitude, 0);
    EXPECT_EQ(fixed.grad_inverse_temperature_bound, 0);
    EXPECT_EQ(fixed.loss, learnable.loss);
    EXPECT_EQ(fixed.grad, learnable.grad);
  }
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

// The same for the tau derivative: a central difference in tau.
TEST(OracleAutoDiff, AutoDiffInTauMatchesACentralDifference) {
  const Description d = testing::random_description(7);
  const std::vector<LossTerm> terms = objective_terms(d);
  const Real h = 1e-7L, tau = 1 / d.loss.temperature;
  const Real difference = (objective_value(d, terms, d.weight, tau + h) -
                           objective_value(d, terms, d.weight, tau - h)) /
                          (2 * h);
  EXPECT_NEAR(static_cast<double>(difference),
              static_cast<double>(autodiff(d).grad_inverse_temperature), 1e-8);
}

}  // namespace
}  // namespace infonce::oracle
