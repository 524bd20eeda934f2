// The oracle's NT-Xent loss on cases small enough to work out by hand (every
// expected value is written from SPEC section 14 with pencil and paper), and
// the input it rejects.
#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "base/error.hpp"
#include "oracle/ntxent_objective.hpp"
#include "tests/oracle/random_ntxent_description.hpp"

namespace infonce::oracle {
namespace {

RealRows column(std::vector<Real> values) {
  return Eigen::Map<RealRows>(values.data(), static_cast<Eigen::Index>(values.size()), 1);
}

// N = 2 samples, D = F = 1, W = 1, no normalisation, T = 1: both views of
// sample 1 are 1, of sample 2 are 2, so the rows are r = (1, 2, 1, 2) and
// z_kj = r_k r_j.
NtXentDescription two_samples() {
  NtXentDescription d;
  d.weight = RealRows::Constant(1, 1, 1);
  d.normalize = false;
  d.temperature = 1;
  d.micro_steps = {{{column({1, 2}), column({1, 2})}}};
  return d;
}

// Row 1 (r = 1): the other rows give z = 2 (sample 2, same view: a negative),
// 1 (its positive), 2: l = log(e^2 + e + e^2) - 1 = log(1 + 2e).
// Row 2 (r = 2): z = 2, 2, 4 (its positive): l = log(1 + 2e^-2).
// Rows 3 and 4 mirror rows 1 and 2: L = (log(1 + 2e) + log(1 + 2e^-2)) / 2.
// (Without the same-view negative, row 1 would be log(1 + e): the test pins
// SPEC 14's softmax over both views.)
// d l / d tau = sum_j p_j z_j - z_pos at tau = 1: row 1 2e / (1 + 2e), row 2
// -4 / (2 + e^2). With W = 1 every logit is tau W^2 r_k r_j, so dL/dW = 2 dL/dtau.
TEST(OracleNtXentLoss, TwoSamplesInOneDimensionByHand) {
  const double e = std::exp(1.0);
  const double loss = (std::log(1 + 2 * e) + std::log(1 + 2 / (e * e))) / 2;
  const double d_tau = (2 * e / (1 + 2 * e) - 4 / (2 + e * e)) / 2;
  const NtXentResult r = evaluate_ntxent(two_samples());
  EXPECT_NEAR(static_cast<double>(r.loss), loss, 1e-15);
  EXPECT_NEAR(static_cast<double>(r.grad_inverse_temperature), d_tau, 1e-15);
  EXPECT_NEAR(static_cast<double>(r.grad_weight(0, 0)), 2 * d_tau, 1e-15);
  EXPECT_EQ(r.max_abs_logit, 4);
}

// One sample: each row's softmax holds only its positive, so the loss and
// every gradient are exactly 0, whatever the features.
TEST(OracleNtXentLoss, OneSampleHasLossZero) {
  NtXentDescription d = testing::random_ntxent_description(3);
  d.micro_steps = {{{column({0.3L}).replicate(1, d.weight.cols()),
                     column({-1.7L}).replicate(1, d.weight.cols())}}};
  const NtXentResult r = evaluate_ntxent(d);
  EXPECT_EQ(r.loss, 0);
  EXPECT_EQ(r.grad_weight.cwiseAbs().maxCoeff(), 0);
  EXPECT_EQ(r.grad_inverse_temperature, 0);
}

// SPEC 4: the reference is the objective over the union of the shards; how
// the samples were split over shards does not change a bit of it.
TEST(OracleNtXentLoss, TheObjectiveDoesNotDependOnTheSharding) {
  for (std::uint64_t seed = 1; seed <= 50; ++seed) {
    SCOPED_TRACE(seed);
    NtXentDescription split = testing::random_ntxent_description(seed);
    NtXentDescription joined = split;
    for (auto& micro : joined.micro_steps) {
      Eigen::Index samples = 0;
      for (const NtXentShardInput& shard : micro) samples += shard.first.rows();
      NtXentShardInput all{RealRows(samples, split.weight.cols()),
                           RealRows(samples, split.weight.cols())};
      Eigen::Index row = 0;
      for (const NtXentShardInput& shard : micro) {
        all.first.middleRows(row, shard.first.rows()) = shard.first;
        all.second.middleRows(row, shard.second.rows()) = shard.second;
        row += shard.first.rows();
      }
      micro = {all};
    }
    const NtXentResult a = evaluate_ntxent(split);
    const NtXentResult b = evaluate_ntxent(joined);
    EXPECT_EQ(a.loss, b.loss);
    EXPECT_EQ(a.grad_weight, b.grad_weight);
    EXPECT_EQ(a.grad_inverse_temperature, b.grad_inverse_temperature);
  }
}

TEST(OracleNtXentLoss, RejectsAnUndefinedCase) {
  const auto rejects = [](NtXentDescription d) { EXPECT_THROW(evaluate_ntxent(d), InputError); };
  NtXentDescription d = two_samples();
  d.micro_steps[0][0].second = column({1});
  rejects(d);  // views of different lengths
  d = two_samples();
  d.micro_steps[0][0] = {RealRows(0, 1), RealRows(0, 1)};
  rejects(d);  // a shard without samples
  d = two_samples();
  d.temperature = 0;
  rejects(d);
  d = two_samples();
  d.micro_steps[0][0].first(0, 0) = std::numeric_limits<Real>::quiet_NaN();
  rejects(d);
  d = two_samples();
  d.micro_steps.clear();
  rejects(d);
  d = two_samples();
  d.micro_steps[0][0].first = RealRows::Ones(2, 2);
  rejects(d);  // a width that is not W's
}

}  // namespace
}  // namespace infonce::oracle
