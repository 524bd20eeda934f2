// The learnable InfoNCE temperature (loss/learnable_temperature.hpp): dL/dtau
// with tau = 1/T, against central finite differences in tau of the forward
// computed in long double, in every mode of SPEC section 2 and on both code
// paths, and on a hand-computed group.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <string>

#include "base/error.hpp"
#include "loss/learnable_temperature.hpp"
#include "support.hpp"

namespace infonce::loss::testing {
namespace {

// The loss in long double at temperature T (a double, as LossSettings holds it).
long double loss_at(const Matrix<long double>& e, const RandomCase& c, CodePath path, double t) {
  LossSettings settings = c.settings;
  settings.temperature = t;
  return infonce_loss<long double>(e, c.layout, settings, path);
}

// dL/dtau = -T^2 dL/dT, the latter by a fourth-order central stencil in T with
// step T / 2^12, so every stencil point T + k h is exact in double: the only
// errors are the stencil's truncation and long double rounding.
long double fd_inverse_temperature_gradient(const Matrix<long double>& e, const RandomCase& c,
                                            CodePath path) {
  const double t = c.settings.temperature;
  const double h = std::ldexp(t, -12);
  auto f = [&](int k) { return loss_at(e, c, path, t + k * h); };
  const long double d_dt = (8 * (f(1) - f(-1)) - (f(2) - f(-2))) / (12.0L * h);
  return -static_cast<long double>(t) * t * d_dt;
}

// A float run decides the fake-negative mask in float: near a tie it can
// decide differently from the long double forward (another function).
constexpr double kFloatMinGap = 1e-4;

TEST(LearnableTemperature, GradientMatchesFiniteDifferencesInEveryModeAndPath) {
  double worst_double = 0, worst_float = 0;
  std::string where_double, where_float;
  int checks = 0, float_skipped = 0;
  std::uint64_t seed = 70000;
  for (const Mode& mode : all_modes()) {
    for (const bool equal_sizes : {true, false}) {
      const RandomCase c = random_case(mode, seed++, equal_sizes);
      const double tau = 1.0 / c.settings.temperature;
      const Matrix<double> e = encode(c.weight, c.features, c.normalize);
      const Matrix<long double> e_long = e.cast<long double>();
      for (const CodePath path : applicable_paths(c.layout)) {
        // The mask does not depend on T, so no stencil point flips one.
        const long double fd = fd_inverse_temperature_gradient(e_long, c, path);
        const auto analytic =
            infonce_with_learnable_temperature<double>(e, c.layout, c.settings, tau, path);
        const auto analytic_float = infonce_with_learnable_temperature<float>(
            e.cast<float>(), c.layout, c.settings, tau, path);
        // Relative to max(|terms|, the largest |similarity|): dL/dtau sums
        // (softmax - target) * similarity, and with a nearly certain positive
        // (loss ~1e-9) it is ~1e-9, known to rounding of its terms only.
        const long double largest_similarity = e.rowwise().squaredNorm().maxCoeff();
        const long double scale = std::max<long double>(
            {std::fabs(fd), analytic.grad_inverse_temperature.magnitude, largest_similarity});
        const double error =
            static_cast<double>(std::fabs(analytic.grad_inverse_temperature.value - fd) / scale);
        const double error_float = static_cast<double>(
            std::fabs(analytic_float.grad_inverse_temperature.value - fd) / scale);
        if (error > worst_double) {
          worst_double = error;
          where_double = mode.name() + " " + path_name(path) + " seed " + std::to_string(seed - 1);
        }
        if (mask_report(e, c.layout, c.settings).min_gap < kFloatMinGap) {
          ++float_skipped;
        } else if (error_float > worst_float) {
          worst_float = error_float;
          where_float = mode.name() + " " + path_name(path) + " seed " + std::to_string(seed - 1);
        }
        ++checks;
      }
    }
  }
  std::printf(
      "learnable temperature, %d checks: dL/dtau max rel err %.2e double (%s), %.2e float (%s; %d "
      "near a mask tie skipped)\n",
      checks, worst_double, where_double.c_str(), worst_float, where_float.c_str(), float_skipped);
  EXPECT_LE(worst_double, 2e-12) << where_double;
  EXPECT_LE(worst_float, 1e-5);
}

// One group q, p, n with similarities s_p = q.p, s_n = q.n:
// L = log(e^{tau s_p} + e^{tau s_n}) - tau s_p, dL/dtau = (s_n - s_p) sigma with
// sigma = e^{tau s_n} / (e^{tau s_p} + e^{tau s_n}).
TEST(LearnableTemperature, HandComputedGroup) {
  const Matrix<double> e{{1.0, 0.0}, {0.6, 0.8}, {-0.28, 0.96}};  // s_p = 0.6, s_n = -0.28
  const GroupLayout layout =
      parse_groups(labels_for_negative_counts(std::vector<std::int32_t>{1}), 3);
  const double tau = 5.0;
  const double sigma = std::exp(tau * -0.28) / (std::exp(tau * 0.6) + std::exp(tau * -0.28));
  for (const bool use_batch : {true, false}) {
    LossSettings settings;
    settings.use_batch = use_batch;
    const auto result = infonce_with_learnable_temperature<double>(e, layout, settings, tau);
    EXPECT_NEAR(result.grad_inverse_temperature.value, (-0.28 - 0.6) * sigma, 1e-15);
    EXPECT_NEAR(result.loss, std::log1p(std::exp(tau * (-0.28 - 0.6))), 1e-15);
  }
}

// A group without negatives: one logit, L = 0 for every tau.
TEST(LearnableTemperature, AGroupWithoutNegativesHasNoTemperatureGradient) {
  const Matrix<double> e{{1.0, 2.0}, {0.5, -1.0}};
  const GroupLayout layout =
      parse_groups(labels_for_negative_counts(std::vector<std::int32_t>{0}), 2);
  const auto result = infonce_with_learnable_temperature<double>(e, layout, {}, 3.0);
  EXPECT_EQ(result.grad_inverse_temperature.value, 0.0);
}

TEST(LearnableTemperature, RejectsAnInverseTemperatureThatIsNotPositiveAndFinite) {
  const Matrix<double> e{{1.0, 0.0}, {0.6, 0.8}};
  const GroupLayout layout =
      parse_groups(labels_for_negative_counts(std::vector<std::int32_t>{0}), 2);
  for (const double tau : {0.0, -1.0, double(INFINITY), double(NAN), 1e-320}) {
    try {
      infonce_with_learnable_temperature<double>(e, layout, {}, tau);
      ADD_FAILURE() << "tau " << tau << " accepted";
    } catch (const InputError& error) {
      EXPECT_NE(std::string(error.what()).find("inverse temperature"), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace infonce::loss::testing
