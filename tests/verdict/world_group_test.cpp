// The gather's group (SPEC section 13, issue 29 finding 8): the rank program
// at a world point against the full-batch reference (its own code path) and
// against its dp twin. The expected numbers come from docs/strategies.md's
// derivation by hand (loss + log R, the own-live slot 1/R of its rows'
// gradient), not from step::predict or prediction/.
#include <gtest/gtest.h>

#include <cmath>

#include "properties/case_spec.hpp"
#include "properties/clip_case.hpp"
#include "step/run_case.hpp"
#include "step/strategy.hpp"

namespace infonce::properties {
namespace {

using step::Strategy;

// P = 2, W = 4 (R = 2), equal batches; the seed picks the features.
CaseSpec replicated_spec(std::int32_t world, std::uint64_t seed) {
  CaseSpec spec;
  spec.world = world;
  spec.dp = 2;
  spec.negatives = {{{1, 2}, {2, 1}}};
  spec.feature_dim = 3;
  spec.embedding_dim = 3;
  spec.temperature = 0.5;
  spec.data_seed = seed;
  spec.rng_seed = seed;
  return spec;
}

struct PointRun {
  double loss = 0;
  Matrix<double> grad;
};

PointRun at(Case c, const Strategy& point) {
  c.strategy = point;
  c.compensate = true;
  c.reduction = point.reduction;
  const step::DistributedResult r = step::run_on_fibers(c, step::StepVariant{}, {});
  return {r.losses.at(0), Eigen::Map<const Matrix<double>>(r.grads.at(0).data(),
                                                           c.weight.rows(), c.weight.cols())};
}

double max_abs(const Matrix<double>& m) { return m.cwiseAbs().maxCoeff(); }

// tevatron's EncoderModel: dist.all_gather on the default group, the own slot
// put back live at the world rank, the loss times the world size.
const Strategy kTevatron{step::GatherKind::detached_own_live, step::LossScope::global,
                         step::BackwardScale::world_size, Reduction::mean,
                         step::GatherGroup::world};

TEST(WorldGroup, TheTevatronPointIsCorrectAndItsLossIsShiftedByLogR) {
  for (const bool clip : {false, true}) {
    for (std::uint64_t seed = 1; seed <= 5; ++seed) {
      SCOPED_TRACE((clip ? "clip seed " : "infonce seed ") + std::to_string(seed));
      const CaseSpec spec = replicated_spec(4, seed);
      const Case c = clip ? build_clip_case(spec) : build_case(spec);
      const step::ReferenceValues reference = step::compute_case_reference(c);
      const double scale = max_abs(reference.grad);
      const PointRun world = at(c, kTevatron);
      EXPECT_LE(max_abs(world.grad - reference.grad), 1e-12 * scale);
      EXPECT_NEAR(world.loss, reference.loss + std::log(2.0), 1e-12);
      // Read as a dp point (what `strategies` said before): W/P = 2, loss unshifted.
      Strategy dp = kTevatron;
      dp.group = step::GatherGroup::dp;
      const PointRun over_dp = at(c, dp);
      EXPECT_LE(max_abs(over_dp.grad - 2.0 * reference.grad), 1e-12 * scale);
      EXPECT_NEAR(over_dp.loss, reference.loss, 1e-12);
    }
  }
}

// A query meeting its own replica copy in the qq block: the world loss is not
// the reference's plus log R, and its gradient is no multiple of it.
TEST(WorldGroup, AQqBlockBreaksThePureShift) {
  CaseSpec spec = replicated_spec(4, 3);
  spec.include_qq = true;
  const Case c = build_case(spec);
  const step::ReferenceValues reference = step::compute_case_reference(c);
  const PointRun world = at(c, kTevatron);
  EXPECT_GT(std::abs(world.loss - reference.loss - std::log(2.0)), 1e-6);
  const double best = (world.grad.cwiseProduct(reference.grad)).sum() /
                      reference.grad.squaredNorm();
  EXPECT_GT(max_abs(world.grad - best * reference.grad), 1e-6 * max_abs(reference.grad));
}

// Without replicas the world group is the DP group: every world point runs
// its dp twin's step, bit for bit (classify names such points equivalent).
TEST(WorldGroup, WithoutReplicasEveryWorldPointIsItsDpTwinBitForBit) {
  for (const bool clip : {false, true}) {
    const CaseSpec spec = replicated_spec(2, 7);
    const Case c = clip ? build_clip_case(spec) : build_case(spec);
    const auto all = step::all_strategies();
    for (std::size_t i = 0; i < step::kDpPointCount; ++i) {
      const Strategy& world = all[i + step::kDpPointCount];
      ASSERT_EQ(world.group, step::GatherGroup::world);
      const PointRun a = at(c, all[i]);
      const PointRun b = at(c, world);
      EXPECT_EQ(a.loss, b.loss) << step::name_of(world);
      EXPECT_EQ(a.grad, b.grad) << step::name_of(world);
    }
  }
}

}  // namespace
}  // namespace infonce::properties
