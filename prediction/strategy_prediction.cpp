#include "prediction/strategy_prediction.hpp"

#include "base/assert.hpp"

namespace infonce::prediction {
namespace {

// How many copies of its loss's gradient a rank sends back: the backward
// signal is multiplied by 1, by the number of DP shards, or by the number of
// ranks.
std::int64_t signal_copies(BackwardScale scale, const StepShape& shape) {
  if (scale == BackwardScale::dp_shards) return shape.dp;
  if (scale == BackwardScale::world_size) return shape.world;
  INFONCE_ASSERT(scale == BackwardScale::none);
  return 1;
}

// What the reduction divides the sum over DP shards by. A mean over the W
// ranks sees each shard's gradient W / P times (its replicas): W / P / W =
// 1 / P. A sum over the DP group adds each shard once.
std::int64_t reduction_divisor(Reduction reduction, const StepShape& shape) {
  return reduction == Reduction::mean ? shape.dp : 1;
}

// The copies of the full-batch gradient that the P ranks' own backwards
// together hold, before scaling and reduction; or why there is no multiple.
Expected live_copies(const Strategy& strategy, Parameters parameters, const StepShape& shape) {
  // One shard: the rank's loss is the full-batch loss, every row live.
  if (shape.dp == 1) return {};
  // No gather: rank d differentiates its own loss l_d. The reference is the
  // mean of the l_d under a mean reduction (P copies of it in the sum of the
  // l_d), their sum under a summing one (one copy).
  if (!shape.use_batch) {
    return {.numerator = strategy.reduction == Reduction::mean ? shape.dp : 1};
  }
  const bool local = strategy.scope == LossScope::local;
  // 1/T, CLIP's scale and bias enter every rank's loss undetached.
  if (parameters == Parameters::direct) {
    // Global: P ranks, each the whole loss. Local: the P losses add up to P
    // times the full one only with the same number of queries per shard.
    if (!local) return {.numerator = shape.dp};
    if (!shape.equal_batches) return {.outcome = Outcome::unequal_batches};
    return {.numerator = shape.dp, .needs_equal_batches = true};
  }
  if (!local) {
    // Every rank evaluates the whole loss; what reaches a row of rank d
    // depends on the gather: its own slot live (one rank per row), nothing
    // live, or every rank's gradient summed onto it (P per row).
    if (strategy.gather == GatherKind::detached) return {.numerator = 0};
    if (strategy.gather == GatherKind::autograd) return {.numerator = shape.dp};
    INFONCE_ASSERT(strategy.gather == GatherKind::detached_own_live);
    return {.numerator = 1};
  }
  // A local loss: rank d's rows reach other ranks' losses (as documents)
  // only through an autograd gather; a detached one drops those terms.
  if (strategy.gather != GatherKind::autograd) return {.outcome = Outcome::dropped_terms};
  if (!shape.equal_batches) return {.outcome = Outcome::unequal_batches};
  return {.numerator = shape.dp, .needs_equal_batches = true};
}

}  // namespace

Expected expected_gradient(const Strategy& strategy, Parameters parameters,
                           const StepShape& shape) {
  INFONCE_ASSERT(shape.dp >= 1 && shape.world >= shape.dp && shape.world % shape.dp == 0);
  Expected out = live_copies(strategy, parameters, shape);
  if (out.outcome != Outcome::exact_multiple) return out;
  out.numerator *= signal_copies(strategy.scale, shape);
  out.denominator = reduction_divisor(strategy.reduction, shape);
  return out;
}

}  // namespace infonce::prediction
