// Ranks share a loss only on bit-identical inputs, and sharing changes no bit
// (step/shared_losses.hpp; here because the cases come from build_case).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "properties/case_spec.hpp"
#include "sim/fiber_simulation.hpp"
#include "step/mutants.hpp"
#include "step/rank_program.hpp"
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

// What the W = 8 specs below differ in.
struct EightRankFields {
  std::int32_t micro_steps = 1;
  std::int32_t hard_negatives = 0;  // 0: unset
  bool include_qq = false;
  std::uint64_t data_seed = 0;
  std::uint64_t rng_seed = 0;
};

// W = 8, P = 4 (2 replicas), object gather, the same groups every micro-step.
properties::CaseSpec eight_rank_spec(const EightRankFields& fields) {
  properties::CaseSpec spec;
  spec.world = 8;
  spec.dp = 4;
  spec.negatives.assign(static_cast<std::size_t>(fields.micro_steps),
                        {{2, 1}, {3}, {1, 1, 1}, {2}});
  spec.feature_dim = 3;
  spec.embedding_dim = 4;
  spec.hard_negatives = fields.hard_negatives;
  spec.include_qq = fields.include_qq;
  spec.data_seed = fields.data_seed;
  spec.rng_seed = fields.rng_seed;
  return spec;
}

// 3 micro-steps, hard negatives padded.
properties::CaseSpec padded_spec() {
  return eight_rank_spec(
      {.micro_steps = 3, .hard_negatives = 4, .include_qq = true, .data_seed = 41, .rng_seed = 42});
}

TEST(SharedLosses, AStepGivesTheSameBitsSharedOrNot) {
  const Case c = properties::build_case(padded_spec());
  RunOptions shared;
  shared.share_identical_losses = true;
  expect_same_results(run_on_fibers(c, {}, shared), run_on_fibers(c, {}, {}));
}

TEST(SharedLosses, RanksWhoseInputsDifferStillDisagree) {
  // Per-rank padding generators: the ranks' layouts differ, so each computes
  // its own loss and the equal-loss property still sees the difference.
  Case c = properties::build_case(padded_spec());
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

// An input held by a shared object carries its hash; a rank that assembled
// the same bits itself (the plain overload) finds the same entry, and one
// different bit is another entry.
TEST(SharedLosses, SharedInputsAndEqualPlainInputsShareAnEntry) {
  SharedLosses<double> shared;
  const loss::LossSettings settings;
  const SharedInput<Matrix<double>> embeddings{
      std::make_shared<const Matrix<double>>(embeddings_2x2(1.0)),
      SharedLosses<double>::hash_of(embeddings_2x2(1.0))};
  const SharedInput<loss::GroupLayout> layout{std::make_shared<const loss::GroupLayout>(one_pair()),
                                              SharedLosses<double>::hash_of(one_pair())};
  const auto first = shared.loss_and_gradient(0, embeddings, layout, settings);
  const auto again = shared.loss_and_gradient(0, embeddings, layout, settings);
  const auto plain = shared.loss_and_gradient(0, embeddings_2x2(1.0), one_pair(), settings);
  EXPECT_EQ(shared.evaluations(), 1);
  EXPECT_EQ(shared.reuses(), 2);
  EXPECT_EQ(first.get(), again.get());
  EXPECT_EQ(first.get(), plain.get());
  const SharedInput<Matrix<double>> next{
      std::make_shared<const Matrix<double>>(embeddings_2x2(std::nextafter(1.0, 2.0))),
      SharedLosses<double>::hash_of(embeddings_2x2(std::nextafter(1.0, 2.0)))};
  EXPECT_NE(shared.loss_and_gradient(0, next, layout, settings).get(), first.get());
  EXPECT_EQ(shared.evaluations(), 2);
}

// A value derived from a gather result is built once per result (and extra
// key); another result with the same bytes is another object, built again.
TEST(SharedLosses, AGatherMemoBuildsOncePerResult) {
  GatherMemo<std::int64_t> memo;
  const sim::GatheredObjects objects(std::vector<std::byte>(4, std::byte{7}), {0, 1, 4});
  const sim::GatheredObjects equal_bytes(std::vector<std::byte>(4, std::byte{7}), {0, 1, 4});
  int builds = 0;
  const auto build = [&] {
    ++builds;
    return static_cast<std::int64_t>(objects.bytes().size());
  };
  EXPECT_EQ(*memo.get(objects, 0, build), 4);
  EXPECT_EQ(*memo.get(objects, 0, build), 4);
  EXPECT_EQ(builds, 1);
  memo.get(objects, 1, build);
  memo.get(equal_bytes, 0, build);
  EXPECT_EQ(builds, 3);
}

// 2 micro-steps, no hard negatives: every rank's batch and layout come from
// the gathers' shared results.
properties::CaseSpec gathered_spec() {
  return eight_rank_spec({.micro_steps = 2, .data_seed = 43});
}

struct CountedRun {
  DistributedResult result;
  std::int64_t evaluations = 0;
  std::int64_t reuses = 0;
};

CountedRun run_counted(const Case& c, const StepVariant& variant) {
  std::vector<RankOutput<double>> outputs(static_cast<std::size_t>(c.mesh.world));
  SharedLosses<double> shared;
  sim::SimulationOptions options;
  options.world_size = c.mesh.world;
  sim::run_fibers(options, [&](sim::Communicator& comm) {
    outputs[static_cast<std::size_t>(comm.world_rank())] =
        run_rank_program<double>(comm, c, variant, &shared);
  });
  CountedRun run;
  for (const auto& rank : outputs) {
    run.result.losses.push_back(rank.reported_loss);
    run.result.grads.push_back(rank.grad);
    run.result.padded_positives += rank.padded_positives;
  }
  run.evaluations = shared.evaluations();
  run.reuses = shared.reuses();
  return run;
}

TEST(SharedLosses, RanksOfAGatherShareItsConcatenationAndLayout) {
  const Case c = properties::build_case(gathered_spec());
  ASSERT_EQ(c.gather, GatherPath::object);
  const CountedRun run = run_counted(c, {});
  expect_same_results(run.result, run_on_fibers(c, {}, {}));
  // Both replicas' DP groups hold the same data: one loss per micro-step.
  EXPECT_EQ(run.evaluations, 2);
  EXPECT_EQ(run.reuses, 2 * 8 - 2);
}

// Under own-slot-at-world-rank with 2 replicas, world ranks 1..3 put their rows
// in a slot that holds another DP rank's rows: they assemble their own batch
// (not the shared concatenation); ranks 4..7 index past the 4 shards, which
// the trainer rejects (IndexError), shared or not, with the same error.
TEST(SharedLosses, ARankWhoseSlotIsNotItsOwnRowsAssemblesItsOwnBatch) {
  Case c = properties::build_case(gathered_spec());
  StepVariant variant;
  find_mutant("own-slot-at-world-rank")->apply(c, variant);
  RunOptions shared;
  shared.share_identical_losses = true;
  const auto error_of = [&](const RunOptions& options) {
    try {
      run_on_fibers(c, variant, options);
    } catch (const std::exception& e) {  // the simulator names the rank that threw
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string unshared_error = error_of({});
  EXPECT_NE(unshared_error.find("IndexError"), std::string::npos) << unshared_error;
  EXPECT_EQ(error_of(shared), unshared_error);
}

}  // namespace
}  // namespace infonce::step
