// The SigLIP family through the data-parallel step (SPEC sections 15, 16):
// the rank program at every strategy point with the texts (and, under a
// global loss, the images) moved by each of open_clip's transports (bidir,
// shift, reduce, gather), against each other and against the full-batch
// reference. The loss's own backward is checked in tests/oracle (against the
// oracle and AutoDiff).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "base/rng.hpp"
#include "step/run_case.hpp"
#include "step/strategy.hpp"

namespace infonce::step {
namespace {

constexpr std::array<SigLipTransport, 4> kTransports{SigLipTransport::bidir, SigLipTransport::shift,
                                                     SigLipTransport::reduce,
                                                     SigLipTransport::gather};

// W ranks over P shards; shard d holds pairs[d] pairs; D = 3, F_image = 2,
// F_text = 3; numbers from a seeded stream.
Case siglip_case(std::int32_t world, const std::vector<std::int32_t>& pairs,
                 std::int32_t micro_steps, std::uint64_t seed) {
  Rng rng(seed);
  const auto normal = [&] { return rng.normal(); };
  Case c;
  c.mesh = {world, static_cast<std::int32_t>(pairs.size())};
  c.gather = seed % 2 == 0 ? GatherPath::tensor : GatherPath::object;
  c.weight = Matrix<double>::NullaryExpr(3, 5, normal);
  c.accumulation_steps = micro_steps;
  SigLipSettings siglip;
  siglip.image_features = 2;
  siglip.text_normalize = seed % 3 != 0;
  siglip.log_scale = 1.5;
  siglip.bias = -1.0;
  for (std::int32_t m = 0; m < micro_steps; ++m) {
    auto& shards = siglip.batches.emplace_back();
    for (const std::int32_t n : pairs) {
      shards.push_back(
          {Matrix<double>::NullaryExpr(n, 2, normal), Matrix<double>::NullaryExpr(n, 3, normal)});
    }
  }
  c.siglip = std::move(siglip);
  validate_case(c);
  return c;
}

Case at_point(Case c, const Strategy& strategy) {
  c.strategy = strategy;
  c.reduction = strategy.reduction;
  return c;
}

DistributedResult run(const Case& c, SigLipTransport transport) {
  StepVariant variant;
  variant.siglip_transport = transport;
  return run_on_fibers(c, variant, RunOptions{});
}

double max_abs(const Matrix<double>& m) {
  return m.cwiseAbs().maxCoeff();
}

Matrix<double> encoder_of(const Case& c, const std::vector<double>& flat) {
  return Eigen::Map<const Matrix<double>>(flat.data(), c.weight.rows(), c.weight.cols());
}

// Every transport hands the loss the same rows: the same losses bit for bit;
// the gradients differ only in the order the senders' shares are summed.
void expect_transports_agree(const Case& base, const Strategy& strategy) {
  const Case c = at_point(base, strategy);
  const DistributedResult gathered = run(c, SigLipTransport::gather);
  double largest = 1;
  for (const double g : gathered.grads[0]) largest = std::max(largest, std::abs(g));
  for (const SigLipTransport transport : kTransports) {
    const DistributedResult moved = run(c, transport);
    EXPECT_EQ(moved.losses, gathered.losses) << name_of(strategy);
    ASSERT_EQ(moved.grads.size(), gathered.grads.size());
    for (std::size_t w = 0; w < moved.grads.size(); ++w) {
      for (std::size_t i = 0; i < moved.grads[w].size(); ++i) {
        EXPECT_NEAR(moved.grads[w][i], gathered.grads[w][i], 1e-13 * largest)
            << name_of(strategy) << " transport " << static_cast<int>(transport) << " rank " << w
            << " entry " << i;
      }
    }
  }
}

// P = 3 (P - 1 even: bidir exchanges only) and P = 4 (odd: one more shift),
// unequal batches, two micro-steps; world points with 2 replicas (a ring of 6).
TEST(SigLipStep, EveryTransportAgreesAtEveryPoint) {
  const Case three = siglip_case(6, {1, 3, 2}, 2, 4);
  const Case four = siglip_case(4, {2, 1, 1, 3}, 1, 5);
  for (const Strategy& strategy : all_strategies()) {
    expect_transports_agree(three, strategy);
    if (strategy.group == GatherGroup::dp) expect_transports_agree(four, strategy);
  }
}

// The transports are not the same program: the ring ones send point-to-point
// messages (an undelivered one would fail the step), and with autograd the
// received rows' gradient comes back; a detached gather gives other ranks'
// rows none, so the encoder gradient changes with the gather kind.
TEST(SigLipStep, TheGatherKindDecidesWhatTheTravelledRowsGiveBack) {
  const Case base = siglip_case(3, {2, 2, 2}, 1, 8);
  const Strategy autograd{GatherKind::autograd, LossScope::global, BackwardScale::none,
                          Reduction::sum};
  Strategy detached = autograd;
  detached.gather = GatherKind::detached;
  for (const SigLipTransport transport : kTransports) {
    const DistributedResult a = run(at_point(base, autograd), transport);
    const DistributedResult d = run(at_point(base, detached), transport);
    const Case c = at_point(base, autograd);
    EXPECT_GT(max_abs(encoder_of(c, a.grads[0])), 1e-6);
    EXPECT_EQ(max_abs(encoder_of(c, d.grads[0])), 0.0);  // every row a constant
    // The direct parameters are never detached.
    EXPECT_EQ(a.grads[0].back(), d.grads[0].back());
  }
}

// open_clip's SigLipLoss under DDP: texts by an autograd ring, each rank its
// own images against every text divided by its own n, the DDP mean, no
// backward scale. With equal batches: the full-batch gradient, for every
// transport, in both towers, log_scale and bias.
TEST(SigLipStep, OpenClipsPointIsTheFullBatchGradientOnEqualBatches) {
  const Strategy open_clip{GatherKind::autograd, LossScope::local, BackwardScale::none,
                           Reduction::mean};
  for (const std::int32_t shards : {2, 3, 4}) {
    const Case c = at_point(
        siglip_case(shards, std::vector<std::int32_t>(shards, 2), 2, 20 + shards), open_clip);
    const ReferenceValues reference = compute_case_reference(c);
    for (const SigLipTransport transport : kTransports) {
      const DistributedResult r = run(c, transport);
      const Matrix<double> encoder = encoder_of(c, r.grads[0]);
      EXPECT_LE(max_abs(encoder - reference.grad), 1e-12 * max_abs(reference.grad_magnitude))
          << shards << " shards, transport " << static_cast<int>(transport);
      const std::size_t first = static_cast<std::size_t>(c.weight.size());
      for (std::size_t i = 0; i < 2; ++i) {
        EXPECT_NEAR(r.grads[0][first + i], reference.direct_grad[i],
                    1e-12 * reference.direct_magnitude[i]);
      }
    }
  }
}

// The same point with unequal batches: each rank divides by its own n, the
// full batch by N: no multiple of the full-batch gradient.
TEST(SigLipStep, OpenClipsPointIsNoMultipleWithUnequalBatches) {
  const Strategy open_clip{GatherKind::autograd, LossScope::local, BackwardScale::none,
                           Reduction::mean};
  const Case c = at_point(siglip_case(2, {1, 3}, 1, 31), open_clip);
  const ReferenceValues reference = compute_case_reference(c);
  const Matrix<double> encoder = encoder_of(c, run(c, SigLipTransport::bidir).grads[0]);
  const double best = encoder.cwiseProduct(reference.grad).sum() / reference.grad.squaredNorm();
  EXPECT_GT(max_abs(encoder - best * reference.grad), 1e-6 * max_abs(reference.grad_magnitude));
}

// Every point against step/strategy.hpp's prediction with SigLIP's shape (a
// world gather's replica copies of a pair's text are negatives of its image:
// copies interact), for equal and unequal batches, with and without replicas.
TEST(SigLipStep, EveryPointGivesItsPredictedRatios) {
  struct Setup {
    std::int32_t world;
    std::vector<std::int32_t> pairs;
  };
  std::int32_t exact = 0, no_multiple = 0;
  for (const Setup& setup :
       {Setup{2, {2, 2}}, Setup{4, {2, 2}}, Setup{2, {1, 3}}, Setup{6, {1, 2, 2}}}) {
    const Case base = siglip_case(setup.world, setup.pairs, 2, 40 + setup.world);
    const ReferenceValues reference = compute_case_reference(base);
    const bool equal = std::all_of(setup.pairs.begin(), setup.pairs.end(),
                                   [&](std::int32_t n) { return n == setup.pairs.front(); });
    const StepShape shape{.dp = base.mesh.dp,
                          .world = base.mesh.world,
                          .equal_batches = equal,
                          .use_batch = true,
                          .copies_interact = true};
    for (const Strategy& strategy : all_strategies()) {
      const Case c = at_point(base, strategy);
      const std::vector<double> flat = run(c, SigLipTransport::bidir).grads[0];
      const Matrix<double> encoder = encoder_of(c, flat);
      const Prediction want = predict(strategy, ParameterGroup::encoders, shape);
      const double scale = max_abs(reference.grad_magnitude);
      if (strategy.gather == GatherKind::detached && strategy.scope == LossScope::global &&
          want.verdict == Verdict::no_single_ratio) {
        // Every gathered row a constant: 0, whatever the copies (the
        // prediction names the replica copies first, as for NT-Xent).
        EXPECT_EQ(max_abs(encoder), 0.0) << name_of(strategy);
      } else if (want.verdict == Verdict::no_single_ratio) {
        const double best =
            encoder.cwiseProduct(reference.grad).sum() / reference.grad.squaredNorm();
        EXPECT_GT(max_abs(encoder - best * reference.grad), 1e-6 * scale)
            << name_of(strategy) << " W=" << setup.world;
        ++no_multiple;
      } else {
        EXPECT_LE(max_abs(encoder - want.ratio * reference.grad),
                  1e-12 * std::max(1.0, want.ratio) * scale)
            << name_of(strategy) << " W=" << setup.world;
        ++exact;
      }
      const Prediction direct = predict(strategy, ParameterGroup::direct, shape);
      const std::size_t first = static_cast<std::size_t>(c.weight.size());
      if (direct.verdict == Verdict::no_single_ratio) {
        // Two numbers, no one multiple: log_scale's and bias's ratios differ.
        const double log_scale_ratio = flat[first] / reference.direct_grad[0];
        const double bias_ratio = flat[first + 1] / reference.direct_grad[1];
        EXPECT_GT(std::abs(log_scale_ratio - bias_ratio), 1e-6 * std::abs(bias_ratio))
            << name_of(strategy) << " W=" << setup.world;
        continue;
      }
      for (std::size_t i = 0; i < 2; ++i) {
        EXPECT_NEAR(flat[first + i], direct.ratio * reference.direct_grad[i],
                    1e-12 * std::max(1.0, direct.ratio) * reference.direct_magnitude[i])
            << name_of(strategy) << " direct " << i << " W=" << setup.world;
      }
    }
  }
  std::printf("siglip points: %d encoder gradients a predicted multiple, %d predicted none\n",
              exact, no_multiple);
}

}  // namespace
}  // namespace infonce::step
