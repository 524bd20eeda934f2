// loss/siglip (the harness's double-precision reference for SigLIP, SPEC 15)
// against the oracle's independent long double evaluation, on random
// one-micro-step descriptions: the loss, both towers' gradients, d/dlog_scale
// and d/dbias agree to the rounding of double.
#include <algorithm>
#include <cstdio>

#include <gtest/gtest.h>

#include "loss/siglip.hpp"
#include "oracle/siglip_objective.hpp"
#include "tests/oracle/random_siglip_description.hpp"

namespace infonce {
namespace {

Matrix<double> to_double(const oracle::RealRows& rows) {
  return rows.cast<double>();
}

// One micro-step's shards, their rows of one tower stacked in shard order.
Matrix<double> stacked(const std::vector<oracle::ClipShardInput>& shards, bool image) {
  Eigen::Index pairs = 0;
  for (const auto& shard : shards) pairs += shard.image.rows();
  Matrix<double> out(pairs, image ? shards[0].image.cols() : shards[0].text.cols());
  Eigen::Index row = 0;
  for (const auto& shard : shards) {
    out.middleRows(row, shard.image.rows()) = to_double(image ? shard.image : shard.text);
    row += shard.image.rows();
  }
  return out;
}

double relative(const Matrix<double>& got, const oracle::RealRows& want,
                const oracle::RealRows& bound) {
  return (got - to_double(want)).cwiseAbs().maxCoeff() /
         (1 + static_cast<double>(bound.maxCoeff()));
}

TEST(SigLipReference, AgreesWithTheOracleOnRandomCases) {
  double worst_loss = 0, worst_weight = 0, worst_direct = 0;
  constexpr int kCases = 400;
  for (std::uint64_t seed = 1; seed <= kCases; ++seed) {
    SCOPED_TRACE(seed);
    oracle::SigLipDescription d = oracle::testing::random_siglip_description(seed);
    d.micro_steps.resize(1);
    d.accumulation_normalize = true;
    const oracle::SigLipResult want = oracle::evaluate_siglip(d);
    const loss::ClipTowers towers{to_double(d.image_weight), d.image_normalize,
                                  to_double(d.text_weight), d.text_normalize};
    const loss::SigLipFullBatchResult<double> got = loss::siglip_full_batch<double>(
        towers, stacked(d.micro_steps[0], true), stacked(d.micro_steps[0], false),
        {static_cast<double>(d.log_scale), static_cast<double>(d.bias)});
    const double loss = std::abs(got.loss - static_cast<double>(want.loss)) /
                        (1 + static_cast<double>(want.max_abs_logit));
    const double weight =
        std::max(relative(got.grad_image_weight, want.grad_image_weight, want.grad_image_bound),
                 relative(got.grad_text_weight, want.grad_text_weight, want.grad_text_bound));
    const double direct =
        std::max(std::abs(got.grad_log_scale - static_cast<double>(want.grad_log_scale)) /
                     (1 + static_cast<double>(want.grad_log_scale_bound)),
                 std::abs(got.grad_bias - static_cast<double>(want.grad_bias)) /
                     (1 + static_cast<double>(want.grad_bias_bound)));
    EXPECT_LE(loss, 1e-14);
    EXPECT_LE(weight, 1e-13);
    EXPECT_LE(direct, 1e-13);
    worst_loss = std::max(worst_loss, loss);
    worst_weight = std::max(worst_weight, weight);
    worst_direct = std::max(worst_direct, direct);
  }
  std::printf("loss/siglip vs the oracle, %d cases, worst: loss %.3e, towers %.3e, direct %.3e\n",
              kCases, worst_loss, worst_weight, worst_direct);
}

// One pair, worked by hand: a = (1, 0), b = (0.6, 0.8) (both unit), scale
// e^0 = 1, bias 0.5: z = 0.6 + 0.5 = 1.1, L = log(1 + e^-1.1) =
// 0.28733533..., dL/dbias = -sigmoid(-1.1) = -0.24973989..., dL/dlog_scale =
// -sigmoid(-1.1) * 0.6.
TEST(SigLipReference, OnePairByHand) {
  const Matrix<double> image = (Matrix<double>(1, 2) << 1, 0).finished();
  const Matrix<double> text = (Matrix<double>(1, 2) << 0.6, 0.8).finished();
  const loss::SigLipRowsGradient<double> g =
      loss::siglip_loss_and_gradient<double>({image, text, 0}, {0.0, 0.5});
  EXPECT_NEAR(g.loss, 0.2873353251, 1e-9);
  EXPECT_NEAR(g.grad_bias, -0.2497398944, 1e-9);
  EXPECT_NEAR(g.grad_log_scale, -0.2497398944 * 0.6, 1e-9);
  // d/da = -sigmoid(-1.1) * b
  EXPECT_NEAR(g.grad_images(0, 1), -0.2497398944 * 0.8, 1e-9);
}

// Two pairs, the off-diagonal logits negatives: a = (1, 0), (0, 1), b the
// same, scale 1, bias 0: L = (2 log(1 + e^-1) + 2 log(1 + e^0)) / 2 =
// log(1 + e^-1) + log 2 = 0.31326169 + 0.69314718.
TEST(SigLipReference, TwoPairsNegativesByHand) {
  const Matrix<double> rows = Matrix<double>::Identity(2, 2);
  const loss::SigLipRowsGradient<double> g =
      loss::siglip_loss_and_gradient<double>({rows, rows, 0}, {0.0, 0.0});
  EXPECT_NEAR(g.loss, 0.3132616875 + 0.6931471806, 1e-9);
  // dL/dbias = (2 * -sigmoid(-1) + 2 * sigmoid(0)) / 2 = -0.26894142 + 0.5.
  EXPECT_NEAR(g.grad_bias, -0.2689414214 + 0.5, 1e-9);
}

}  // namespace
}  // namespace infonce
