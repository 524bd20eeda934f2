#include "step/strategy.hpp"

#include <sstream>

#include "base/assert.hpp"

namespace infonce::step {

std::array<Strategy, kDpPointCount> dp_strategies() {
  std::array<Strategy, kDpPointCount> out;
  std::size_t next = 0;
  for (const GatherKind gather :
       {GatherKind::detached_own_live, GatherKind::detached, GatherKind::autograd}) {
    for (const LossScope scope : {LossScope::global, LossScope::local}) {
      for (const BackwardScale scale :
           {BackwardScale::none, BackwardScale::dp_shards, BackwardScale::world_size}) {
        for (const Reduction reduction : {Reduction::mean, Reduction::sum}) {
          out[next++] = {gather, scope, scale, reduction};
        }
      }
    }
  }
  INFONCE_ASSERT(next == out.size());
  return out;
}

std::array<Strategy, kPointCount> all_strategies() {
  std::array<Strategy, kPointCount> out;
  const auto dp = dp_strategies();
  for (std::size_t i = 0; i < dp.size(); ++i) {
    out[i] = dp[i];
    out[i + dp.size()] = dp[i];
    out[i + dp.size()].group = GatherGroup::world;
  }
  return out;
}

double backward_scale(BackwardScale scale, const StepShape& shape) {
  switch (scale) {
    case BackwardScale::none:
      return 1.0;
    case BackwardScale::dp_shards:
      return shape.dp;
    case BackwardScale::world_size:
      return shape.world;
  }
  INFONCE_ASSERT(false);
  return 1.0;
}

double reduction_factor(Reduction reduction, const StepShape& shape) {
  INFONCE_ASSERT(shape.dp >= 1 && shape.world >= shape.dp && shape.world % shape.dp == 0);
  // Mean: (1/W) x (R identical replicas of each shard's gradient) = 1/P.
  return reduction == Reduction::mean ? 1.0 / shape.dp : 1.0;
}

namespace {

// b of strategy.hpp, or no single ratio.
struct ShardSum {
  bool single = true;
  double b = 1.0;
  NoRatioCause cause = NoRatioCause::none;
  bool depends_on_equal_batches = false;
};

ShardSum shard_sum(const Strategy& strategy, ParameterGroup group, const StepShape& shape) {
  const bool world = strategy.group == GatherGroup::world;
  // No gather: each rank differentiates its own loss l_d with all rows live.
  // The reference is L itself when P = 1; without use_batch it is the mean
  // of the l_d (b = P) or, under a summing reduction, their sum (b = 1).
  if (!shape.use_batch) return {.b = strategy.reduction == Reduction::mean ? shape.dp : 1.0};
  if ((world ? shape.world : shape.dp) == 1) return {};
  const double p = shape.dp;
  const double replicas = static_cast<double>(shape.world / shape.dp);
  // A world gather's R copies of a row meet each other (a qq or dd pair of a
  // row with its own copy, padding drawn per copy): not R repetitions of L.
  if (world && replicas > 1 && shape.copies_interact) {
    return {.single = false, .b = 0, .cause = NoRatioCause::replica_copies};
  }
  // Otherwise a world gather's loss is L + log R with each row's dL/dE split
  // evenly over its R copies: only a lone live copy (own slot) sees 1/R.
  if (strategy.scope == LossScope::global) {
    // Every rank computes the same L. The direct parameters are never
    // detached: each rank holds all of dL/dphi, P ranks sum P of them.
    if (group == ParameterGroup::direct) return {.b = p};
    switch (strategy.gather) {
      case GatherKind::detached_own_live:
        // rank d: J_d^T dL/dE_d; the sum over d is the chain rule (world: 1/R of it)
        return {.b = world ? 1.0 / replicas : 1.0};
      case GatherKind::detached:
        return {.b = 0.0};  // no row is live: nothing reaches the encoders
      case GatherKind::autograd:
        return {.b = p};  // rank d receives sum over ranks of dL/dE_d = P dL/dE_d
    }
  }
  // One shard gathered R times (world group, P = 1): every rank's loss is
  // L + log R; only the detached gathers lose terms (the documents' copies).
  if (shape.dp == 1) {
    if (group == ParameterGroup::direct || strategy.gather == GatherKind::autograd) return {};
    return {.single = false, .b = 0, .cause = NoRatioCause::dropped_terms};
  }
  // Local: sum over d of l_d = P L only when every shard has n queries
  // (l_d averages over n_d, L over N = sum n_d).
  const bool equal = shape.equal_batches;
  const ShardSum unequal{.single = false, .b = 0, .cause = NoRatioCause::unequal_batches};
  if (group == ParameterGroup::direct) {
    // sum over d of dl_d/dphi = d(sum l_d)/dphi, whatever the gather.
    return equal ? ShardSum{.b = p, .depends_on_equal_batches = true} : unequal;
  }
  if (strategy.gather == GatherKind::autograd) {
    // Rank d gets dl_d/dE_d (its queries) plus sum over d' of dl_d'/dE_d
    // (its gathered rows): summed over d, the gradient of sum l_d.
    return equal ? ShardSum{.b = p, .depends_on_equal_batches = true} : unequal;
  }
  // A detached gather keeps only dl_d/dE_d: the terms dl_d'/dE_d, d' != d
  // (rank d's rows as documents of another rank's queries) are lost; over the
  // world group (P = 1 included) also the documents' other R - 1 copies.
  return {.single = false, .b = 0, .cause = NoRatioCause::dropped_terms};
}

}  // namespace

Prediction predict(const Strategy& strategy, ParameterGroup group, const StepShape& shape) {
  const ShardSum sum = shard_sum(strategy, group, shape);
  Prediction out;
  out.depends_on_equal_batches = sum.depends_on_equal_batches;
  if (!sum.single) {
    out.verdict = Verdict::no_single_ratio;
    out.ratio = 0;
    out.cause = sum.cause;
    return out;
  }
  // s b / P (mean) or s b (sum): s, b and P are integers, so dividing last
  // gives the exact quotient whenever it is one (1/P x P can round).
  const double divisor = strategy.reduction == Reduction::mean ? shape.dp : 1.0;
  INFONCE_ASSERT(reduction_factor(strategy.reduction, shape) == 1.0 / divisor);
  out.ratio = backward_scale(strategy.scale, shape) * sum.b / divisor;
  out.verdict = out.ratio == 1.0 ? Verdict::correct : Verdict::ratio;
  return out;
}

namespace {

// A point's scale is written "scale-" and s, not as the case file writes it.
constexpr std::array<EnumName<BackwardScale>, 3> kBackwardScalePointNames{{
    {BackwardScale::none, "scale-1"},
    {BackwardScale::dp_shards, "scale-P"},
    {BackwardScale::world_size, "scale-W"},
}};

}  // namespace

std::string_view name_of(GatherKind gather) {
  return name_in(kGatherKindNames, gather);
}

std::string_view name_of(LossScope scope) {
  return name_in(kLossScopeNames, scope);
}

std::string_view name_of(BackwardScale scale) {
  return name_in(kBackwardScalePointNames, scale);
}

std::string_view name_of(Reduction reduction) {
  return name_in(kReductionNames, reduction);
}

std::string_view name_of(GatherGroup group) {
  return name_in(kGatherGroupNames, group);
}

std::string_view name_of(ParameterGroup group) {
  return group == ParameterGroup::encoders ? "encoders" : "direct";
}

std::string_view name_of(NoRatioCause cause) {
  switch (cause) {
    case NoRatioCause::none:
      return "none";
    case NoRatioCause::dropped_terms:
      return "dropped terms";
    case NoRatioCause::unequal_batches:
      return "unequal batches";
    case NoRatioCause::replica_copies:
      return "replica copies";
  }
  return "?";
}

std::string name_of(const Strategy& strategy) {
  std::string out(name_of(strategy.gather));
  out += '/';
  out += name_of(strategy.scope);
  out += '/';
  out += name_of(strategy.scale);
  out += '/';
  out += name_of(strategy.reduction);
  if (strategy.group == GatherGroup::world) out += "/world";
  return out;
}

std::string describe(const Prediction& prediction) {
  std::ostringstream out;
  switch (prediction.verdict) {
    case Verdict::correct:
      out << "correct";
      break;
    case Verdict::ratio:
      out << "ratio " << prediction.ratio;
      break;
    case Verdict::no_single_ratio:
      out << "no single ratio (" << name_of(prediction.cause) << ")";
      break;
  }
  if (prediction.depends_on_equal_batches) out << " [equal batches]";
  return out.str();
}

}  // namespace infonce::step
