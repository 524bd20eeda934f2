#include "prediction/strategy_prediction.hpp"

#include "base/assert.hpp"

namespace infonce::prediction {
namespace {

Expected world_live_copies(const Strategy& strategy, Parameters parameters,
                           const StepShape& shape);

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

// How many members the gather's group has: the DP shards, or every rank.
std::int64_t gathered_slots(GatherGroup group, const StepShape& shape) {
  return group == GatherGroup::world ? shape.world : shape.dp;
}

// The copies of the full-batch gradient that the P ranks' own backwards
// together hold, before scaling and reduction; or why there is no multiple.
Expected live_copies(const Strategy& strategy, Parameters parameters, const StepShape& shape) {
  // No gather: rank d differentiates its own loss l_d. The reference is the
  // mean of the l_d under a mean reduction (P copies of it in the sum of the
  // l_d), their sum under a summing one (one copy).
  if (!shape.use_batch) {
    return {.numerator = strategy.reduction == Reduction::mean ? shape.dp : 1};
  }
  // One slot gathered: the rank's loss is the full-batch loss, every row live.
  if (gathered_slots(strategy.group, shape) == 1) return {};
  if (strategy.group == GatherGroup::world) return world_live_copies(strategy, parameters, shape);
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

// The world group (docs/strategies.md, "The gather's group"): the gathered
// batch is every shard R = W / P times. With no row meeting its own copy,
// each logit row's softmax runs over R equal copies of every document: its
// log-sum-exp is log R plus the distinct batch's, its target logit the same,
// so every rank's loss is the DP gather's plus log R, and the direct
// parameters' gradients do not change. A row's gradient is shared evenly by
// its R copies (the loss is symmetric in them). So a rank whose one live slot
// is among R copies holds 1/R of what the DP gather gives it; an autograd
// gather sums W ranks x 1/R = P per row, as the DP gather's P ranks x 1; a
// detached gather's live query rows keep their full gradient.
Expected world_live_copies(const Strategy& strategy, Parameters parameters,
                           const StepShape& shape) {
  const std::int64_t replicas = shape.world / shape.dp;
  if (replicas > 1 && shape.copies_interact) return {.outcome = Outcome::replica_copies};
  StepShape distinct = shape;
  distinct.world = shape.dp;  // the DP gather of the same shards, no replicas
  Strategy over_dp = strategy;
  over_dp.group = GatherGroup::dp;
  const bool own_slot_only = strategy.gather == GatherKind::detached_own_live &&
                             parameters == Parameters::encoders;
  if (!own_slot_only) {
    // P = 1 (one shard, R copies): the DP "gather" is none at all, every
    // document live; over the world only an autograd gather keeps them all.
    if (shape.dp == 1 && strategy.gather != GatherKind::autograd &&
        parameters == Parameters::encoders) {
      if (strategy.scope == LossScope::local) return {.outcome = Outcome::dropped_terms};
      if (strategy.gather == GatherKind::detached) return {.numerator = 0};
    }
    return live_copies(over_dp, parameters, distinct);
  }
  // The own slot live, the other R - 1 copies of the rank's rows constants.
  if (strategy.scope == LossScope::local) return {.outcome = Outcome::dropped_terms};
  if (shape.dp == 1) return {.numerator = 1, .denominator = replicas};
  Expected out = live_copies(over_dp, parameters, distinct);
  out.denominator *= replicas;
  return out;
}

}  // namespace

Expected expected_gradient(const Strategy& strategy, Parameters parameters,
                           const StepShape& shape) {
  INFONCE_ASSERT(shape.dp >= 1 && shape.world >= shape.dp && shape.world % shape.dp == 0);
  Expected out = live_copies(strategy, parameters, shape);
  if (out.outcome != Outcome::exact_multiple) return out;
  out.numerator *= signal_copies(strategy.scale, shape);
  out.denominator *= reduction_divisor(strategy.reduction, shape);
  return out;
}

}  // namespace infonce::prediction
