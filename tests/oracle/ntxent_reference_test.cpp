// loss/ntxent (the harness's double-precision reference for NT-Xent, SPEC 14)
// against the oracle's independent long double evaluation, on random
// one-micro-step descriptions: the loss, dL/dW and dL/dtau agree to the
// rounding of double.
#include <algorithm>
#include <cstdio>

#include <gtest/gtest.h>

#include "loss/ntxent.hpp"
#include "oracle/ntxent_objective.hpp"
#include "tests/oracle/random_ntxent_description.hpp"

namespace infonce {
namespace {

Eigen::MatrixXd to_double(const oracle::RealRows& rows) {
  return rows.cast<double>();
}

// One micro-step's shards, their first views stacked, then their second views.
struct Views {
  Eigen::MatrixXd first, second;
};

Views stacked(const std::vector<oracle::NtXentShardInput>& shards) {
  Eigen::Index samples = 0;
  for (const auto& shard : shards) samples += shard.first.rows();
  const Eigen::Index width = shards[0].first.cols();
  Views out{Eigen::MatrixXd(samples, width), Eigen::MatrixXd(samples, width)};
  Eigen::Index row = 0;
  for (const auto& shard : shards) {
    out.first.middleRows(row, shard.first.rows()) = to_double(shard.first);
    out.second.middleRows(row, shard.second.rows()) = to_double(shard.second);
    row += shard.first.rows();
  }
  return out;
}

TEST(NtXentReference, AgreesWithTheOracleOnRandomCases) {
  double worst_loss = 0, worst_weight = 0, worst_tau = 0;
  constexpr int kCases = 400;
  for (std::uint64_t seed = 1; seed <= kCases; ++seed) {
    SCOPED_TRACE(seed);
    oracle::NtXentDescription d = oracle::testing::random_ntxent_description(seed);
    d.micro_steps.resize(1);
    d.accumulation_normalize = true;
    const oracle::NtXentResult want = oracle::evaluate_ntxent(d);
    const Views views = stacked(d.micro_steps[0]);
    const loss::NtXentFullBatchResult<double> got =
        loss::ntxent_full_batch<double>(to_double(d.weight), d.normalize, views.first, views.second,
                                        static_cast<double>(1 / d.temperature));
    const double scale = 1 + static_cast<double>(want.max_abs_logit);
    const double loss = std::abs(got.loss - static_cast<double>(want.loss)) / scale;
    const double weight = (got.grad_weight - to_double(want.grad_weight)).cwiseAbs().maxCoeff() /
                          (1 + static_cast<double>(want.grad_weight_bound.maxCoeff()));
    const double tau = std::abs(got.grad_inverse_temperature -
                                static_cast<double>(want.grad_inverse_temperature)) /
                       (1 + static_cast<double>(want.grad_inverse_temperature_bound));
    EXPECT_LE(loss, 1e-14);
    EXPECT_LE(weight, 1e-13);
    EXPECT_LE(tau, 1e-13);
    worst_loss = std::max(worst_loss, loss);
    worst_weight = std::max(worst_weight, weight);
    worst_tau = std::max(worst_tau, tau);
  }
  std::printf("loss/ntxent vs the oracle, %d cases, worst: loss %.3e, weight %.3e, tau %.3e\n",
              kCases, worst_loss, worst_weight, worst_tau);
}

// A rank's local loss (its own 2 n_d rows against every gathered row) is the
// global loss's terms of its rows: over the ranks, the local losses weighted
// by 2 n_d / 2N add up to the global loss, and their query gradients tile the
// global one.
TEST(NtXentReference, LocalLossesTileTheGlobalLoss) {
  for (std::uint64_t seed = 1; seed <= 100; ++seed) {
    SCOPED_TRACE(seed);
    const oracle::NtXentDescription d = oracle::testing::random_ntxent_description(seed);
    const auto& shards = d.micro_steps[0];
    const Views views = stacked(shards);
    const Eigen::Index samples = views.first.rows();
    Eigen::MatrixXd keys(2 * samples, views.first.cols());
    keys << views.first, views.second;
    const auto global_positions = loss::ntxent_global_queries(samples);
    const auto global = loss::ntxent_loss_and_gradient<double>({keys, keys, global_positions}, 2.5);
    double weighted = 0;
    Eigen::Index prefix = 0;
    for (const auto& shard : shards) {
      const Eigen::Index n = shard.first.rows();
      Eigen::MatrixXd own(2 * n, keys.cols());
      own << keys.middleRows(prefix, n), keys.middleRows(samples + prefix, n);
      std::vector<loss::NtXentQuery> positions;
      for (Eigen::Index i = 0; i < n; ++i) positions.push_back(global_positions[prefix + i]);
      for (Eigen::Index i = 0; i < n; ++i) {
        positions.push_back(global_positions[samples + prefix + i]);
      }
      const auto local = loss::ntxent_loss_and_gradient<double>({own, keys, positions}, 2.5);
      weighted += local.loss * static_cast<double>(n) / static_cast<double>(samples);
      const double share = static_cast<double>(n) / static_cast<double>(samples);
      EXPECT_LE((local.grad_queries.topRows(n) * share - global.grad_queries.middleRows(prefix, n))
                    .cwiseAbs()
                    .maxCoeff(),
                1e-12);
      prefix += n;
    }
    EXPECT_NEAR(weighted, global.loss, 1e-12);
  }
}

}  // namespace
}  // namespace infonce
