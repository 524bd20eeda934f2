// The oracle's derived NT-Xent backward (ntxent_loss_backward,
// encoder_backward) against forward-mode AutoDiff of its own forward
// (ntxent_objective_value), in the encoder's weight and the inverse
// temperature at once, on random descriptions over every setting.
#include <algorithm>
#include <cstdio>
#include <vector>

#include <gtest/gtest.h>
#include <Eigen/Core>
#include <unsupported/Eigen/AutoDiff>

#include "oracle/ntxent_objective.hpp"
#include "tests/oracle/random_ntxent_description.hpp"

namespace infonce::oracle {
namespace {

using Derivatives = Eigen::Matrix<Real, Eigen::Dynamic, 1>;
using Dual = Eigen::AutoDiffScalar<Derivatives>;

struct NtXentAutoDiffResult {
  Real loss = 0;
  RealRows grad_weight;
  Real grad_inverse_temperature = 0;
};

// The derivatives, in order: W's entries (row-major), then tau.
NtXentAutoDiffResult autodiff(const NtXentDescription& d) {
  const Eigen::Index count = d.weight.size() + 1;
  Rows<Dual> weight(d.weight.rows(), d.weight.cols());
  for (Eigen::Index k = 0; k < d.weight.size(); ++k) {
    weight(k / d.weight.cols(), k % d.weight.cols()) =
        Dual(d.weight(k / d.weight.cols(), k % d.weight.cols()), count, k);
  }
  const Dual tau(1 / d.temperature, count, d.weight.size());
  const Dual value = ntxent_objective_value(d, ntxent_batches(d), weight, tau);
  NtXentAutoDiffResult out;
  out.loss = value.value();
  out.grad_weight = RealRows(d.weight.rows(), d.weight.cols());
  for (Eigen::Index k = 0; k < d.weight.size(); ++k) {
    out.grad_weight(k / d.weight.cols(), k % d.weight.cols()) = value.derivatives()(k);
  }
  out.grad_inverse_temperature = value.derivatives()(d.weight.size());
  return out;
}

// |derived - reference| over 1 + the summand scale (inputs are O(1); the
// floor keeps an exactly vanishing gradient from dividing by 0).
Real relative_error(const RealRows& derived, const RealRows& reference, const RealRows& magnitude) {
  return (derived - reference).cwiseAbs().maxCoeff() / (1 + magnitude.maxCoeff());
}

Real relative_error(Real derived, Real reference, Real magnitude) {
  return std::abs(derived - reference) / (1 + magnitude);
}

TEST(OracleNtXentAutoDiff, DerivedBackwardEqualsAutoDiffOnRandomCases) {
  Real worst_weight = 0, worst_tau = 0, worst_loss = 0;
  constexpr int kCases = 400;
  for (std::uint64_t seed = 1; seed <= kCases; ++seed) {
    SCOPED_TRACE(seed);
    const NtXentDescription d = testing::random_ntxent_description(seed);
    const NtXentResult derived = evaluate_ntxent(d);
    const NtXentAutoDiffResult reference = autodiff(d);
    const Real weight =
        relative_error(derived.grad_weight, reference.grad_weight, derived.grad_weight_magnitude);
    const Real tau =
        relative_error(derived.grad_inverse_temperature, reference.grad_inverse_temperature,
                       derived.grad_inverse_temperature_magnitude);
    const Real loss = relative_error(derived.loss, reference.loss, derived.max_abs_logit);
    EXPECT_LE(weight, 1e-16L);
    EXPECT_LE(tau, 1e-16L);
    EXPECT_LE(loss, 1e-16L);
    worst_weight = std::max(worst_weight, weight);
    worst_tau = std::max(worst_tau, tau);
    worst_loss = std::max(worst_loss, loss);
  }
  std::printf(
      "ntxent derived backward vs AutoDiff, %d cases, worst error of 1 + the summand scale: "
      "weight %.3Le, inverse temperature %.3Le; loss %.3Le of 1 + max|z|\n",
      kCases, worst_weight, worst_tau, worst_loss);
}

// Magnitudes and bounds are what their names say: the terms' |sum| is at most
// their magnitude, which is at most the bound with softmax - onehot apart.
TEST(OracleNtXentAutoDiff, MagnitudesBoundTheGradientAndBoundsTheMagnitudes) {
  const Real slack = 1 + 1e-15L;
  for (std::uint64_t seed = 1; seed <= 100; ++seed) {
    SCOPED_TRACE(seed);
    const NtXentResult r = evaluate_ntxent(testing::random_ntxent_description(seed));
    EXPECT_TRUE(
        (r.grad_weight.cwiseAbs().array() <= r.grad_weight_magnitude.array() * slack).all());
    EXPECT_TRUE((r.grad_weight_magnitude.array() <= r.grad_weight_bound.array() * slack).all());
    EXPECT_LE(std::abs(r.grad_inverse_temperature), r.grad_inverse_temperature_magnitude * slack);
    EXPECT_LE(r.grad_inverse_temperature_magnitude, r.grad_inverse_temperature_bound * slack);
    EXPECT_GE(r.max_encoding_condition, 1);
  }
}

// That the harness differentiates at all: d objective / d tau and d / d W(0, 0)
// match central differences in long double.
TEST(OracleNtXentAutoDiff, AutoDiffMatchesACentralDifference) {
  const NtXentDescription d = testing::random_ntxent_description(7);
  const std::vector<NtXentBatch> batches = ntxent_batches(d);
  const Real h = 1e-7L;
  const Real tau = 1 / d.temperature;
  auto value = [&](const RealRows& weight, Real t) {
    return ntxent_objective_value(d, batches, weight, t);
  };
  const NtXentAutoDiffResult reference = autodiff(d);
  const Real by_tau = (value(d.weight, tau + h) - value(d.weight, tau - h)) / (2 * h);
  EXPECT_NEAR(static_cast<double>(by_tau), static_cast<double>(reference.grad_inverse_temperature),
              1e-8);
  RealRows plus = d.weight, minus = d.weight;
  plus(0, 0) += h;
  minus(0, 0) -= h;
  const Real by_weight = (value(plus, tau) - value(minus, tau)) / (2 * h);
  EXPECT_NEAR(static_cast<double>(by_weight), static_cast<double>(reference.grad_weight(0, 0)),
              1e-8);
}

}  // namespace
}  // namespace infonce::oracle
