// (c) The trainer's batched and loop code paths agree wherever both apply,
// and the automatic choice is the trainer's.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>

#include "base/error.hpp"
#include "support.hpp"

namespace infonce::loss::testing {
namespace {

template <class Scalar>
struct PathDifference {
  double loss = 0;
  double grad = 0;
};

template <class Scalar>
PathDifference<Scalar> compare_paths(const RandomCase& c) {
  const Matrix<Scalar> e =
      encode<Scalar>(c.weight.cast<Scalar>(), c.features.cast<Scalar>(), c.normalize);
  const auto batched = infonce_loss_and_gradient(e, c.layout, c.settings, CodePath::batched);
  const auto loop = infonce_loss_and_gradient(e, c.layout, c.settings, CodePath::loop);
  // Forward-only evaluation gives the same value as the forward of the backward call.
  EXPECT_EQ(infonce_loss(e, c.layout, c.settings, CodePath::batched), batched.loss);
  EXPECT_EQ(infonce_loss(e, c.layout, c.settings, CodePath::loop), loop.loss);
  // Gradient entries are sums of terms up to max|e| / (T B); when they cancel
  // (legacy padding repeating a certain positive) the error is relative to the terms.
  const double term_scale = static_cast<double>(e.cwiseAbs().maxCoeff()) / c.settings.temperature /
                            c.layout.group_count();
  const double scale =
      std::max(static_cast<double>(loop.grad_embeddings.cwiseAbs().maxCoeff()), term_scale);
  const double grad_difference =
      static_cast<double>((batched.grad_embeddings - loop.grad_embeddings).cwiseAbs().maxCoeff());
  return {scalar_relative_error(batched.loss, loop.loss), grad_difference / scale};
}

TEST(CodePaths, BatchedEqualsLoopOnRandomInputs) {
  PathDifference<double> worst_double;
  PathDifference<float> worst_float;
  std::int64_t cases = 0;
  for (const Mode& mode : all_modes()) {
    for (std::uint64_t seed = 0; seed < 20; ++seed) {
      const RandomCase c = random_case(mode, 30000 + seed * 7 + mode.hard_negatives.value_or(0),
                                       /*equal_sizes=*/true);
      ASSERT_TRUE(all_groups_same_size(c.layout));
      const auto d = compare_paths<double>(c);
      const auto f = compare_paths<float>(c);
      worst_double.loss = std::max(worst_double.loss, d.loss);
      worst_double.grad = std::max(worst_double.grad, d.grad);
      worst_float.loss = std::max(worst_float.loss, f.loss);
      worst_float.grad = std::max(worst_float.grad, f.grad);
      ++cases;
    }
  }
  std::printf(
      "batched vs loop over %lld cases: double loss %.3e grad %.3e; float loss %.3e grad "
      "%.3e\n",
      static_cast<long long>(cases), worst_double.loss, worst_double.grad, worst_float.loss,
      worst_float.grad);
  EXPECT_LE(worst_double.loss, 1e-13);
  EXPECT_LE(worst_double.grad, 1e-12);
  EXPECT_LE(worst_float.loss, 1e-5);
  EXPECT_LE(worst_float.grad, 1e-4);
}

TEST(CodePaths, AutomaticChoiceIsTheTrainers) {
  LossSettings settings;
  GroupLayout equal = parse_groups(labels_for_negative_counts(std::vector<std::int32_t>{2, 2}), 8);
  GroupLayout mixed = parse_groups(labels_for_negative_counts(std::vector<std::int32_t>{1, 2}), 7);
  GroupLayout none;
  EXPECT_TRUE(trainer_uses_batched_path(equal, settings));
  EXPECT_FALSE(trainer_uses_batched_path(mixed, settings));
  EXPECT_FALSE(trainer_uses_batched_path(none, settings));
  settings.hard_negatives = 2;  // the trainer batches whenever hard_negatives is set
  EXPECT_TRUE(trainer_uses_batched_path(mixed, settings));
}

TEST(CodePaths, AutomaticGivesTheChosenPathsExactResult) {
  const Mode mode;  // the trainer's defaults
  for (const bool equal_sizes : {true, false}) {
    const RandomCase c = random_case(mode, 4242, equal_sizes);
    const Matrix<double> e = encode(c.weight, c.features, c.normalize);
    const CodePath chosen = equal_sizes ? CodePath::batched : CodePath::loop;
    const auto automatic = infonce_loss_and_gradient(e, c.layout, c.settings);
    const auto explicit_path = infonce_loss_and_gradient(e, c.layout, c.settings, chosen);
    EXPECT_EQ(automatic.loss, explicit_path.loss);
    EXPECT_TRUE(automatic.grad_embeddings == explicit_path.grad_embeddings);
  }
}

}  // namespace
}  // namespace infonce::loss::testing
