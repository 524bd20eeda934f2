// The oracle's derived SigLIP backward (siglip_loss_backward,
// encoder_backward) against forward-mode AutoDiff of its own forward
// (siglip_objective_value), in both towers' weights, log_scale and the bias
// at once, on random descriptions over every setting.
#include <algorithm>
#include <cstdio>
#include <vector>

#include <gtest/gtest.h>
#include <Eigen/Core>
#include <unsupported/Eigen/AutoDiff>

#include "oracle/siglip_objective.hpp"
#include "tests/oracle/random_siglip_description.hpp"

namespace infonce::oracle {
namespace {

using Derivatives = Eigen::Matrix<Real, Eigen::Dynamic, 1>;
using Dual = Eigen::AutoDiffScalar<Derivatives>;

struct SigLipAutoDiffResult {
  Real loss = 0;
  RealRows grad_image_weight, grad_text_weight;
  Real grad_log_scale = 0, grad_bias = 0;
};

// The weights' entries as duals numbered from `first`, row-major.
Rows<Dual> dual_rows(const RealRows& values, Eigen::Index count, Eigen::Index first) {
  Rows<Dual> out(values.rows(), values.cols());
  for (Eigen::Index k = 0; k < values.size(); ++k) {
    out(k / values.cols(), k % values.cols()) =
        Dual(values(k / values.cols(), k % values.cols()), count, first + k);
  }
  return out;
}

RealRows derivatives_of(const Dual& value, const RealRows& shape, Eigen::Index first) {
  RealRows out(shape.rows(), shape.cols());
  for (Eigen::Index k = 0; k < shape.size(); ++k) {
    out(k / shape.cols(), k % shape.cols()) = value.derivatives()(first + k);
  }
  return out;
}

// The derivatives, in order: the image tower's entries, the text tower's,
// log_scale, bias.
SigLipAutoDiffResult autodiff(const SigLipDescription& d) {
  const Eigen::Index images = d.image_weight.size();
  const Eigen::Index texts = d.text_weight.size();
  const Eigen::Index count = images + texts + 2;
  const Dual log_scale(d.log_scale, count, images + texts);
  const Dual bias(d.bias, count, images + texts + 1);
  const Dual value =
      siglip_objective_value(d, siglip_batches(d), dual_rows(d.image_weight, count, 0),
                             dual_rows(d.text_weight, count, images), log_scale, bias);
  SigLipAutoDiffResult out;
  out.loss = value.value();
  out.grad_image_weight = derivatives_of(value, d.image_weight, 0);
  out.grad_text_weight = derivatives_of(value, d.text_weight, images);
  out.grad_log_scale = value.derivatives()(images + texts);
  out.grad_bias = value.derivatives()(images + texts + 1);
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

// The towers' errors are judged per unit of the encoding's condition
// (oracle/encoder.hpp): normalising a row of tiny norm magnifies the rounding
// of both computations by it (seed 88: condition 1470, raw error 3.5e-16).
TEST(OracleSigLipAutoDiff, DerivedBackwardEqualsAutoDiffOnRandomCases) {
  Real worst_image = 0, worst_text = 0, worst_log_scale = 0, worst_bias = 0, worst_loss = 0;
  Real worst_raw_tower = 0;
  constexpr int kCases = 400;
  for (std::uint64_t seed = 1; seed <= kCases; ++seed) {
    SCOPED_TRACE(seed);
    const SigLipDescription d = testing::random_siglip_description(seed);
    const SigLipResult derived = evaluate_siglip(d);
    const SigLipAutoDiffResult reference = autodiff(d);
    const Real condition = derived.max_encoding_condition;
    const Real raw_image = relative_error(derived.grad_image_weight, reference.grad_image_weight,
                                          derived.grad_image_magnitude);
    const Real raw_text = relative_error(derived.grad_text_weight, reference.grad_text_weight,
                                         derived.grad_text_magnitude);
    const Real image = raw_image / condition;
    const Real text = raw_text / condition;
    const Real log_scale = relative_error(derived.grad_log_scale, reference.grad_log_scale,
                                          derived.grad_log_scale_magnitude);
    const Real bias =
        relative_error(derived.grad_bias, reference.grad_bias, derived.grad_bias_magnitude);
    const Real loss = relative_error(derived.loss, reference.loss, derived.max_abs_logit);
    for (const Real error : {image, text, log_scale, bias, loss}) {
      EXPECT_LE(error, 1e-16L) << "max |z| " << static_cast<double>(derived.max_abs_logit)
                               << ", encoding condition " << static_cast<double>(condition);
    }
    worst_image = std::max(worst_image, image);
    worst_text = std::max(worst_text, text);
    worst_log_scale = std::max(worst_log_scale, log_scale);
    worst_bias = std::max(worst_bias, bias);
    worst_loss = std::max(worst_loss, loss);
    worst_raw_tower = std::max({worst_raw_tower, raw_image, raw_text});
  }
  std::printf(
      "siglip derived backward vs AutoDiff, %d cases, worst error of 1 + the summand scale: "
      "image tower %.3Le, text tower %.3Le (per unit of encoding condition; raw %.3Le), "
      "log_scale %.3Le, bias %.3Le; loss %.3Le of 1 + max|z|\n",
      kCases, worst_image, worst_text, worst_raw_tower, worst_log_scale, worst_bias, worst_loss);
}

// The cases exercise what they should: both label signs' sigmoids far from
// 0 and 1 somewhere, and a bias gradient that is not 0.
TEST(OracleSigLipAutoDiff, RandomCasesReachEveryTerm) {
  int nonzero_bias = 0, large_logits = 0;
  for (std::uint64_t seed = 1; seed <= 400; ++seed) {
    const SigLipResult r = evaluate_siglip(testing::random_siglip_description(seed));
    nonzero_bias += std::abs(r.grad_bias) > 1e-3L ? 1 : 0;
    large_logits += r.max_abs_logit > 5 ? 1 : 0;
  }
  EXPECT_GT(nonzero_bias, 300);
  EXPECT_GT(large_logits, 100);
}

// Magnitudes and bounds are what their names say.
TEST(OracleSigLipAutoDiff, MagnitudesBoundTheGradientAndBoundsTheMagnitudes) {
  const Real slack = 1 + 1e-15L;
  for (std::uint64_t seed = 1; seed <= 100; ++seed) {
    SCOPED_TRACE(seed);
    const SigLipResult r = evaluate_siglip(testing::random_siglip_description(seed));
    for (const auto* pair : {&r.grad_image_weight, &r.grad_text_weight}) {
      const RealRows& magnitude =
          pair == &r.grad_image_weight ? r.grad_image_magnitude : r.grad_text_magnitude;
      const RealRows& bound = pair == &r.grad_image_weight ? r.grad_image_bound : r.grad_text_bound;
      EXPECT_TRUE((pair->cwiseAbs().array() <= magnitude.array() * slack).all());
      EXPECT_TRUE((magnitude.array() <= bound.array() * slack).all());
    }
    EXPECT_LE(std::abs(r.grad_log_scale), r.grad_log_scale_magnitude * slack);
    EXPECT_LE(r.grad_log_scale_magnitude, r.grad_log_scale_bound * slack);
    EXPECT_LE(std::abs(r.grad_bias), r.grad_bias_magnitude * slack);
    EXPECT_LE(r.grad_bias_magnitude, r.grad_bias_bound * slack);
  }
}

// That the harness differentiates at all: d / d bias and d / d log_scale
// match central differences in long double.
TEST(OracleSigLipAutoDiff, AutoDiffMatchesACentralDifference) {
  const SigLipDescription d = testing::random_siglip_description(7);
  const std::vector<ClipBatch> batches = siglip_batches(d);
  const Real h = 1e-7L;
  auto value = [&](Real log_scale, Real bias) {
    return siglip_objective_value(d, batches, d.image_weight, d.text_weight, log_scale, bias);
  };
  const SigLipAutoDiffResult reference = autodiff(d);
  EXPECT_NEAR(static_cast<double>(
                  (value(d.log_scale, d.bias + h) - value(d.log_scale, d.bias - h)) / (2 * h)),
              static_cast<double>(reference.grad_bias), 1e-8);
  EXPECT_NEAR(static_cast<double>(
                  (value(d.log_scale + h, d.bias) - value(d.log_scale - h, d.bias)) / (2 * h)),
              static_cast<double>(reference.grad_log_scale), 1e-8);
}

}  // namespace
}  // namespace infonce::oracle
