// (e) Every edge case DESIGN.md settles: a clear InputError, or the value the
// trainer gives.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "base/error.hpp"
#include "support.hpp"

namespace infonce::loss::testing {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

void expect_input_error(const std::function<void()>& action, const std::string& fragment) {
  try {
    action();
    ADD_FAILURE() << "expected InputError containing \"" << fragment << "\"";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos) << error.what();
  }
}

Matrix<double> column(std::initializer_list<double> values) {
  Matrix<double> m(static_cast<Eigen::Index>(values.size()), 1);
  Eigen::Index i = 0;
  for (const double v : values) m(i++, 0) = v;
  return m;
}

GroupLayout layout_of(std::vector<std::int32_t> negatives) {
  std::int32_t rows = 0;
  for (const auto k : negatives) rows += k + 2;
  return parse_groups(labels_for_negative_counts(negatives), rows);
}

const std::vector<CodePath> kBothPaths{CodePath::batched, CodePath::loop};

TEST(EdgeCases, TemperatureMustBeFiniteAndPositive) {
  const Matrix<double> e = column({1, 1, 0});
  for (const double t : {0.0, -0.1, kInf, -kInf, kNan}) {
    LossSettings settings;
    settings.temperature = t;
    for (const CodePath path : kBothPaths) {
      expect_input_error([&] { infonce_loss(e, layout_of({1}), settings, path); },
                         "must be finite and > 0");
      expect_input_error([&] { infonce_loss_and_gradient(e, layout_of({1}), settings, path); },
                         "temperature = ");
    }
  }
  LossSettings settings;
  settings.temperature = 0;
  expect_input_error([&] { infonce_loss(e, layout_of({1}), settings); }, "temperature = 0 must");
}

TEST(EdgeCases, ZeroGroupsIsAnError) {
  const GroupLayout none = parse_groups(std::vector<std::uint8_t>{}, 0);
  const Matrix<double> e(0, 3);
  for (const bool use_batch : {true, false}) {
    LossSettings settings;
    settings.use_batch = use_batch;
    for (const CodePath path : {CodePath::automatic, CodePath::batched, CodePath::loop}) {
      expect_input_error([&] { infonce_loss_and_gradient(e, none, settings, path); },
                         "the loss needs at least one group (the batch has none)");
    }
  }
}

// A group without negatives: its only logit is its positive, CE = 0, no gradient.
TEST(EdgeCases, GroupWithoutNegativesGivesZeroLossWithinGroups) {
  LossSettings settings;
  settings.use_batch = false;
  const Matrix<double> e = column({0.3, -2, 5, 7});
  for (const CodePath path : kBothPaths) {
    const auto result = infonce_loss_and_gradient(e, layout_of({0, 0}), settings, path);
    EXPECT_EQ(result.loss, 0.0);
    EXPECT_TRUE(result.grad_embeddings.isZero(0.0));
  }
}

TEST(EdgeCases, HardNegativesNeedANegativePerGroup) {
  GeneratedPadding padding({1});
  expect_input_error(
      [&] {
        resize_hard_negatives(layout_of({2, 0, 1}), 2, Padding::fixed, padding.source(0, 0));
      },
      "hard_negatives needs >= 1 negative per group (group 1 has none)");
}

// Negative margin: h_g = s_target + margin < s_target masks the target itself.
// One group, T = 1, rows [q p n] = [1 1 0.5]: qd = [1, 0.5], h = 0.9: the target 1 > 0.9 is
// masked, 0.5 is not. Logits [-inf, 0.5]: loss = lse - (-inf) = +inf.
// torch's gradient: dCE/dlogits = softmax - onehot = [0 - 1, 1]; the -1 lands on the masked
// entry and is dropped. So dL/dn = 1 * q = 1, dL/dq = 1 * n = 0.5, dL/dp = 0.
TEST(EdgeCases, NegativeMarginGivesInfiniteLossAndTorchsGradient) {
  LossSettings settings;
  settings.temperature = 1.0;
  settings.mask_fake_negative = true;
  settings.fake_neg_margin = -0.1;
  for (const CodePath path : kBothPaths) {
    const auto result =
        infonce_loss_and_gradient(column({1, 1, 0.5}), layout_of({1}), settings, path);
    EXPECT_EQ(result.loss, kInf) << path_name(path);
    EXPECT_EQ(result.grad_embeddings(0, 0), 0.5);
    EXPECT_EQ(result.grad_embeddings(1, 0), 0.0);
    EXPECT_EQ(result.grad_embeddings(2, 0), 1.0);
  }
  // With more groups the mean is still +inf and the gradient stays finite.
  const auto two = infonce_loss_and_gradient(column({1, 1, 0.5, 1, 0.2, 0.05}), layout_of({1, 1}),
                                             settings, CodePath::loop);
  EXPECT_EQ(two.loss, kInf);
  EXPECT_TRUE(two.grad_embeddings.allFinite());
}

// Every logit masked: the trainer's loss would be NaN.
TEST(EdgeCases, EveryLogitMaskedIsAnError) {
  LossSettings settings;
  settings.mask_fake_negative = true;
  settings.fake_neg_margin = -0.5;
  // Rows [q0 p0 n0 | q1 p1] = [1 1 -1 | 0 1]: group 0 keeps n0 (-1 < 1 - 0.5); group 1 has
  // every similarity 0 > 0 - 0.5, so all its logits are masked.
  for (const CodePath path : {CodePath::automatic, CodePath::loop}) {
    expect_input_error(
        [&] {
          infonce_loss(column({1, 1, -1, 0, 1}), layout_of({1, 0}), settings, path);
        },
        "group 1: every logit is masked");
  }
  expect_input_error(
      [&] {
        infonce_loss(column({1, 1, 1, 1}), layout_of({0, 0}), settings, CodePath::batched);
      },
      "group 0: every logit is masked");
}

TEST(EdgeCases, NonFiniteInputsAreErrors) {
  LossSettings settings;
  for (const double bad : {kNan, kInf}) {
    expect_input_error(
        [&] {
          infonce_loss(column({1, bad, 0}), layout_of({1}), settings);
        },
        "embeddings must be finite");
    Matrix<double> weight = Matrix<double>::Ones(2, 2);
    const Matrix<double> features = Matrix<double>::Ones(3, 2);
    expect_input_error(
        [&] {
          Matrix<double> f = features;
          f(1, 1) = bad;
          encode(weight, f, true);
        },
        "features must be finite");
    weight(0, 1) = bad;
    expect_input_error([&] { encode(weight, features, false); }, "encoder weight must be finite");
  }
  settings.mask_fake_negative = true;
  settings.fake_neg_margin = kNan;
  expect_input_error(
      [&] {
        infonce_loss(column({1, 1, 0}), layout_of({1}), settings);
      },
      "fake_neg_margin = nan must be finite");
  // A margin is irrelevant without masking, as in the trainer.
  settings.mask_fake_negative = false;
  EXPECT_TRUE(std::isfinite(infonce_loss(column({1, 1, 0}), layout_of({1}), settings)));
}

TEST(EdgeCases, OverflowingSimilaritiesAreErrors) {
  LossSettings settings;
  expect_input_error(
      [&] {
        infonce_loss(column({1e160, 1e160, 0}), layout_of({1}), settings);
      },
      "similarities / temperature overflow");
  expect_input_error(
      [&] {
        infonce_loss<float>(column({1e19, 1, 0}).cast<float>(), layout_of({1}), settings);
      },
      "similarities / temperature overflow");
}

TEST(EdgeCases, BatchedPathNeedsEqualGroupSizes) {
  LossSettings settings;
  for (const bool use_batch : {true, false}) {
    settings.use_batch = use_batch;
    expect_input_error(
        [&] {
          infonce_loss(column({1, 1, 0, 1, 1}), layout_of({1, 0}), settings, CodePath::batched);
        },
        "the batched code path needs every group the same size");
  }
  // hard_negatives set but the layout not resized: the trainer's choice is batched, so automatic
  // fails too.
  settings.hard_negatives = 1;
  expect_input_error(
      [&] {
        infonce_loss(column({1, 1, 0, 1, 1}), layout_of({1, 0}), settings);
      },
      "is the layout resized for hard_negatives?");
}

TEST(EdgeCases, EncoderShapeMismatchIsAnError) {
  expect_input_error(
      [] {
        encode(Matrix<double>(Matrix<double>::Ones(2, 3)),
               Matrix<double>(Matrix<double>::Ones(4, 2)), true);
      },
      "features have 2 columns but the encoder weight expects 3");
}

// The eps branch of the normalisation: a zero row stays zero with gradient g / eps.
TEST(EdgeCases, EncoderEpsBranch) {
  const Matrix<double> weight = Matrix<double>::Identity(2, 2);
  Matrix<double> features(2, 2);
  features << 0, 0, 3e-13, 4e-13;  // norms 0 and 5e-13, both below eps = 1e-12
  const Matrix<double> e = encode(weight, features, true);
  EXPECT_EQ(e(0, 0), 0.0);
  EXPECT_DOUBLE_EQ(e(1, 0), 0.3);  // 3e-13 / 1e-12
  EXPECT_DOUBLE_EQ(e(1, 1), 0.4);
  Matrix<double> upstream(2, 2);
  upstream << 1, 2, 3, 4;
  // dE/dy = I / eps, dW = (g / eps)^T x: only row 1 has nonzero features.
  const Matrix<double> grad = encode_backward(weight, features, true, upstream);
  EXPECT_DOUBLE_EQ(grad(0, 0), 3 / 1e-12 * 3e-13);
  EXPECT_DOUBLE_EQ(grad(0, 1), 3 / 1e-12 * 4e-13);
  EXPECT_DOUBLE_EQ(grad(1, 0), 4 / 1e-12 * 3e-13);
  EXPECT_DOUBLE_EQ(grad(1, 1), 4 / 1e-12 * 4e-13);
}

}  // namespace
}  // namespace infonce::loss::testing
