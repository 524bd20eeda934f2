// Ranks share a loss only on bit-identical inputs, and sharing changes no bit
// (step/shared_losses.hpp; here because the cases come from build_case).
#include <gtest/gtest.h>

#include <cstring>

#include "properties/case_spec.hpp"
#include "step/mutants.hpp"
#include "step/run_case.hpp"
#include "step/shared_losses.hpp"

namespace infonce::step {
namespace {

Matrix<double> embeddings_2x2(double corner) {
  return Matrix<double>{{corner, 0.5}, {-0.25, 2.0}};
}

loss::GroupLayout one_pair() {
  loss::GroupLayout layout;
  const std::int32_t rows[] = {0, 1};
  layout.add_group(rows);
  return layout;
}

bool same_bits(const Matrix<double>& a, const Matrix<double>& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() &&
         std::memcmp(a.data(), b.data(), sizeof(double) * static_cast<std::size_t>(a.size())) == 0;
}

TEST(SharedLosses, IdenticalInputsAreEvaluatedOnce) {
  SharedLosses<double> shared;
  const loss::LossSettings settings;
  const auto first = shared.loss_and_gradient(0, embeddings_2x2(1.0), one_pair(), settings);
  const auto second = shared.loss_and_gradient(0, embeddings_2x2(1.0), one_pair(), settings);
  EXPECT_EQ(shared.evaluations(), 1);
  EXPECT_EQ(shared.reuses(), 1);
  EXPECT_EQ(first.get(), second.get());
  const auto direct =
      loss::infonce_loss_and_gradient<double>(embeddings_2x2(1.0), one_pair(), settings);
  EXPECT_EQ(std::memcmp(&first->loss, &direct.loss, sizeof(double)), 0);
  EXPECT_TRUE(same_bits(first->grad_embeddings, direct.grad_embeddings));
}

TEST(SharedLosses, ADifferentBitMicroStepOrLayoutIsEvaluatedAgain) {
  SharedLosses<double> shared;
  const loss::LossSettings settings;
  shared.loss_and_gradient(0, embeddings_2x2(1.0), one_pair(), settings);
  // The smallest change of one entry: the next double after 1.0.
  shared.loss_and_gradient(0, embeddings_2x2(std::nextafter(1.0, 2.0)), one_pair(), settings);
  shared.loss_and_gradient(1, embeddings_2x2(1.0), one_pair(), settings);
  loss::GroupLayout swapped;
  const std::int32_t rows[] = {1, 0};
  swapped.add_group(rows);
  shared.loss_and_gradient(0, embeddings_2x2(1.0), swapped, settings);
  EXPECT_EQ(shared.evaluations(), 4);
  EXPECT_EQ(shared.reuses(), 0);
}

// The settings and the code path are part of the key: the same bits under
// another temperature, or by the other path, are another loss.
TEST(SharedLosses, OtherSettingsOrCodePathAreEvaluatedAgain) {
  SharedLosses<double> shared;
  const loss::LossSettings settings;
  const auto first = shared.loss_and_gradient(0, embeddings_2x2(1.0), one_pair(), settings);
  loss::LossSettings hotter = settings;
  hotter.temperature = 2 * settings.temperature;
  const auto second = shared.loss_and_gradient(0, embeddings_2x2(1.0), one_pair(), hotter);
  loss::LossSettings masked = settings;
  masked.mask_fake_negative = true;
  shared.loss_and_gradient(0, embeddings_2x2(1.0), one_pair(), masked);
  shared.loss_and_gradient(0, embeddings_2x2(1.0), one_pair(), settings, loss::CodePath::loop);
  EXPECT_EQ(shared.evaluations(), 4);
  EXPECT_EQ(shared.reuses(), 0);
  const auto direct =
      loss::infonce_loss_and_gradient<double>(embeddings_2x2(1.0), one_pair(), hotter);
  EXPECT_EQ(std::memcmp(&second->loss, &direct.loss, sizeof(double)), 0);
  EXPECT_NE(first.get(), second.get());  // not the entry stored for other settings
}

TEST(SharedLosses, PastTheEntryLimitRanksComputeUnshared) {
  SharedLosses<double> shared;
  const loss::LossSettings settings;
  const auto limit = static_cast<std::int32_t>(SharedLosses<double>::kMaxEntries);
  for (std::int32_t micro = 0; micro < limit + 3; ++micro) {
    shared.loss_and_gradient(micro, embeddings_2x2(1.0), one_pair(), settings);
  }
  // Entries under the limit are still found; those past it were not stored.
  shared.loss_and_gradient(0, embeddings_2x2(1.0), one_pair(), settings);
  shared.loss_and_gradient(limit + 1, embeddings_2x2(1.0), one_pair(), settings);
  EXPECT_EQ(shared.reuses(), 1);
  EXPECT_EQ(shared.evaluations(), limit + 4);
}

void expect_same_results(const DistributedResult& a, const DistributedResult& b) {
  ASSERT_EQ(a.losses.size(), b.losses.size());
  EXPECT_EQ(std::memcmp(a.losses.data(), b.losses.data(), sizeof(double) * a.losses.size()), 0);
  for (std::size_t w = 0; w < a.grads.size(); ++w) {
    ASSERT_EQ(a.grads[w].size(), b.grads[w].size());
    EXPECT_EQ(std::memcmp(a.grads[w].data(), b.grads[w].data(), sizeof(double) * a.grads[w].size()),
              0)
        << "rank " << w;
  }
  EXPECT_EQ(a.padded_positives, b.padded_positives);
}

// W = 8, P = 4 (2 replicas), 3 micro-steps, hard negatives padded.
properties::CaseSpec eight_rank_spec() {
  properties::CaseSpec spec;
  spec.world = 8;
  spec.dp = 4;
  spec.negatives.assign(3, {{2, 1}, {3}, {1, 1, 1}, {2}});
  spec.feature_dim = 3;
  spec.embedding_dim = 4;
  spec.hard_negatives = 4;
  spec.include_qq = true;
  spec.data_seed = 41;
  spec.rng_seed = 42;
  return spec;
}

TEST(SharedLosses, AStepGivesTheSameBitsSharedOrNot) {
  const Case c = properties::build_case(eight_rank_spec());
  RunOptions shared;
  shared.share_identical_losses = true;
  expect_same_results(run_on_fibers(c, {}, shared), run_on_fibers(c, {}, {}));
}

TEST(SharedLosses, RanksWhoseInputsDifferStillDisagree) {
  // Per-rank padding generators: the ranks' layouts differ, so each computes
  // its own loss and the equal-loss property still sees the difference.
  Case c = properties::build_case(eight_rank_spec());
  StepVariant variant;
  find_mutant("per-rank-rng")->apply(c, variant);
  RunOptions shared;
  shared.share_identical_losses = true;
  const DistributedResult with = run_on_fibers(c, variant, shared);
  expect_same_results(with, run_on_fibers(c, variant, {}));
  bool some_differ = false;
  for (double loss : with.losses) some_differ = some_differ || loss != with.losses[0];
  EXPECT_TRUE(some_differ);
}

}  // namespace
}  // namespace infonce::step
