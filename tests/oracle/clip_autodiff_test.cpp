// The oracle's derived CLIP backward (clip_loss_backward, encoder_backward)
// against forward-mode AutoDiff of its own forward (clip_objective_value), in
// both towers' weights, log_scale and the bias at once, on random
// descriptions over every setting.
#include <algorithm>
#include <cstdio>
#include <optional>

#include <gtest/gtest.h>
#include <Eigen/Core>
#include <unsupported/Eigen/AutoDiff>

#include "oracle/clip_objective.hpp"
#include "tests/oracle/random_clip_description.hpp"

namespace infonce::oracle {
namespace {

using Derivatives = Eigen::Matrix<Real, Eigen::Dynamic, 1>;
using Dual = Eigen::AutoDiffScalar<Derivatives>;

struct ClipAutoDiffResult {
  Real loss = 0;
  RealRows grad_image_weight, grad_text_weight;
  Real grad_log_scale = 0, grad_bias = 0;
};

// The derivatives, in order: image weight entries (row-major), text weight
// entries, log_scale, then the bias when there is one.
class Variables {
 public:
  explicit Variables(const ClipDescription& d)
      : count_(d.image_weight.size() + d.text_weight.size() + 1 + (d.bias ? 1 : 0)) {}

  Rows<Dual> rows(const RealRows& values) {
    Rows<Dual> out(values.rows(), values.cols());
    for (Eigen::Index i = 0; i < values.rows(); ++i) {
      for (Eigen::Index j = 0; j < values.cols(); ++j) out(i, j) = next(values(i, j));
    }
    return out;
  }
  Dual next(Real value) { return Dual(value, count_, next_++); }

  static RealRows read_rows(const Derivatives& derivatives, Eigen::Index first,
                            const RealRows& shape) {
    RealRows out(shape.rows(), shape.cols());
    for (Eigen::Index k = 0; k < shape.size(); ++k)
      out(k / shape.cols(), k % shape.cols()) = derivatives(first + k);
    return out;
  }

 private:
  Eigen::Index count_;
  Eigen::Index next_ = 0;
};

ClipAutoDiffResult autodiff(const ClipDescription& d) {
  Variables variables(d);
  const Rows<Dual> image_weight = variables.rows(d.image_weight);
  const Rows<Dual> text_weight = variables.rows(d.text_weight);
  const Dual log_scale = variables.next(d.log_scale);
  std::optional<Dual> bias;
  if (d.bias) bias = variables.next(*d.bias);
  const Dual value =
      clip_objective_value(d, clip_batches(d), image_weight, text_weight, log_scale, bias);
  const Derivatives& derivatives = value.derivatives();
  const Eigen::Index text_first = d.image_weight.size();
  const Eigen::Index log_scale_index = text_first + d.text_weight.size();
  ClipAutoDiffResult out;
  out.loss = value.value();
  out.grad_image_weight = Variables::read_rows(derivatives, 0, d.image_weight);
  out.grad_text_weight = Variables::read_rows(derivatives, text_first, d.text_weight);
  out.grad_log_scale = derivatives(log_scale_index);
  if (d.bias) out.grad_bias = derivatives(log_scale_index + 1);
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

TEST(OracleClipAutoDiff, DerivedBackwardEqualsAutoDiffOnRandomCases) {
  Real worst_image = 0, worst_text = 0, worst_log_scale = 0, worst_bias = 0, worst_loss = 0;
  constexpr int kCases = 400;
  for (std::uint64_t seed = 1; seed <= kCases; ++seed) {
    SCOPED_TRACE(seed);
    const ClipDescription d = testing::random_clip_description(seed);
    const ClipResult derived = evaluate_clip(d);
    const ClipAutoDiffResult reference = autodiff(d);
    const Real image = relative_error(derived.grad_image_weight, reference.grad_image_weight,
                                      derived.grad_image_magnitude);
    const Real text = relative_error(derived.grad_text_weight, reference.grad_text_weight,
                                     derived.grad_text_magnitude);
    const Real log_scale = relative_error(derived.grad_log_scale, reference.grad_log_scale,
                                          derived.grad_log_scale_magnitude);
    const Real bias =
        relative_error(derived.grad_bias, reference.grad_bias, derived.grad_bias_magnitude);
    const Real loss = relative_error(derived.loss, reference.loss, derived.max_abs_logit);
    EXPECT_LE(image, 1e-16L);
    EXPECT_LE(text, 1e-16L);
    EXPECT_LE(log_scale, 1e-16L);
    EXPECT_LE(bias, 1e-16L);
    EXPECT_LE(loss, 1e-16L);
    if (!d.bias) {
      EXPECT_EQ(derived.grad_bias, 0);
      EXPECT_EQ(derived.grad_bias_magnitude, 0);
      EXPECT_EQ(derived.grad_bias_bound, 0);
    }
    worst_image = std::max(worst_image, image);
    worst_text = std::max(worst_text, text);
    worst_log_scale = std::max(worst_log_scale, log_scale);
    worst_bias = std::max(worst_bias, bias);
    worst_loss = std::max(worst_loss, loss);
  }
  std::printf(
      "clip derived backward vs AutoDiff, %d cases, worst error of 1 + the summand scale: "
      "image weight %.3Le, text weight %.3Le, log_scale %.3Le, bias %.3Le; loss %.3Le of 1 + "
      "max|z|\n",
      kCases, worst_image, worst_text, worst_log_scale, worst_bias, worst_loss);
}

// Magnitudes and bounds are what their names say: the terms' |sum| is at most
// their magnitude, which is at most the bound with softmax - onehot apart.
TEST(OracleClipAutoDiff, MagnitudesBoundTheGradientAndBoundsTheMagnitudes) {
  const Real slack = 1 + 1e-15L;
  for (std::uint64_t seed = 1; seed <= 100; ++seed) {
    SCOPED_TRACE(seed);
    const ClipResult r = evaluate_clip(testing::random_clip_description(seed));
    EXPECT_TRUE(
        (r.grad_image_weight.cwiseAbs().array() <= r.grad_image_magnitude.array() * slack).all());
    EXPECT_TRUE(
        (r.grad_text_weight.cwiseAbs().array() <= r.grad_text_magnitude.array() * slack).all());
    EXPECT_LE(std::abs(r.grad_log_scale), r.grad_log_scale_magnitude * slack);
    EXPECT_LE(r.grad_log_scale_magnitude, r.grad_log_scale_bound * slack);
    EXPECT_LE(std::abs(r.grad_bias), r.grad_bias_magnitude * slack);
    EXPECT_LE(r.grad_bias_magnitude, r.grad_bias_bound * slack);
    EXPECT_GE(r.max_encoding_condition, 1);
  }
}

// A crude check that the harness differentiates at all: d objective /
// d log_scale and d / d W_text(0, 0) match central differences in long double.
TEST(OracleClipAutoDiff, AutoDiffMatchesACentralDifference) {
  const ClipDescription d = testing::random_clip_description(7);
  const std::vector<ClipBatch> batches = clip_batches(d);
  const Real h = 1e-7L;
  auto value = [&](const RealRows& text_weight, Real log_scale) {
    return clip_objective_value(d, batches, d.image_weight, text_weight, log_scale, d.bias);
  };
  const ClipAutoDiffResult reference = autodiff(d);
  const Real by_log_scale =
      (value(d.text_weight, d.log_scale + h) - value(d.text_weight, d.log_scale - h)) / (2 * h);
  EXPECT_NEAR(static_cast<double>(by_log_scale), static_cast<double>(reference.grad_log_scale),
              1e-8);
  RealRows plus = d.text_weight, minus = d.text_weight;
  plus(0, 0) += h;
  minus(0, 0) -= h;
  const Real by_text = (value(plus, d.log_scale) - value(minus, d.log_scale)) / (2 * h);
  EXPECT_NEAR(static_cast<double>(by_text), static_cast<double>(reference.grad_text_weight(0, 0)),
              1e-8);
}

}  // namespace
}  // namespace infonce::oracle
