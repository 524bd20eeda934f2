#include "step/mutants.hpp"

#include <array>

namespace infonce::step {
namespace {

// A mutant that is a point of the strategy space: the step runs `rule(c)`
// instead of the trainer's strategy (effective_strategy).
template <StrategyRule rule>
void at_strategy(Case&, StepVariant& v) {
  v.strategy_rule = rule;
}

// The strategy points of the mutants, each the trainer's rule with one
// deviation (so a case the trainer leaves unscaled stays so where the
// deviation does not reach it, as the shipped bugs did).
Strategy before_fix(const Case& c) {
  Strategy s = effective_strategy(c);
  s.scale = BackwardScale::none;
  return s;
}
Strategy scaled_by_world(const Case& c) {
  Strategy s = effective_strategy(c);
  if (s.scale == BackwardScale::dp_shards) s.scale = BackwardScale::world_size;
  return s;
}
Strategy compensated_under_sum(const Case& c) {
  Strategy s = effective_strategy(c);
  if (c.compensate && c.loss.use_batch) s.scale = BackwardScale::dp_shards;
  return s;
}
Strategy compensated_without_batch(const Case& c) {
  Strategy s = effective_strategy(c);
  if (c.compensate && c.reduction == Reduction::mean) s.scale = BackwardScale::dp_shards;
  return s;
}
Strategy dp_sum_on_compensated(const Case& c) {
  Strategy s = effective_strategy(c);
  s.reduction = Reduction::sum;  // the scale stays the one compensated for a mean
  return s;
}

const std::array kMutants = {
    // Strategy points (at_strategy) and the knobs that remain, in one list.
    Mutant{"no-compensation", "the trainer before the fix: backward not scaled (gradient is 1/P)",
           CaughtBy::gradient, at_strategy<before_fix>},
    Mutant{"scale-by-world", "scales by the world size W instead of the DP size P",
           CaughtBy::gradient, at_strategy<scaled_by_world>},
    Mutant{"scale-reported-loss", "multiplies the reported loss by s as well as the gradient",
           CaughtBy::gradient, [](Case&, StepVariant& v) { v.scale_reported_loss = true; }},
    Mutant{"compensate-under-sum", "applies the compensation although the reducer sums",
           CaughtBy::gradient, at_strategy<compensated_under_sum>},
    Mutant{"compensate-without-batch", "compensates by P although use_batch is false",
           CaughtBy::gradient, at_strategy<compensated_without_batch>},
    Mutant{"own-slot-at-world-rank", "puts the rank's live rows at its world rank, not its DP rank",
           CaughtBy::crash, [](Case&, StepVariant& v) { v.own_slot_at_world_rank = true; }},
    Mutant{"ga-missing", "omits the 1/A gradient-accumulation normalisation", CaughtBy::gradient,
           [](Case&, StepVariant& v) { v.accumulation = AccumulationScaling::missing; }},
    Mutant{"ga-twice", "applies the 1/A gradient-accumulation normalisation twice",
           CaughtBy::gradient,
           [](Case&, StepVariant& v) { v.accumulation = AccumulationScaling::twice; }},
    Mutant{"labels-ungathered", "tensor path gathers embeddings but leaves labels local",
           CaughtBy::crash,
           [](Case& c, StepVariant& v) {
             c.gather = GatherPath::tensor;
             v.labels_ungathered = true;
           }},
    Mutant{"partial-window-by-steps",
           "normalises a partial accumulation window by the configured steps A, not its length A'",
           CaughtBy::gradient, [](Case&, StepVariant& v) { v.window_by_configured_steps = true; }},
    Mutant{"rank-major-documents",
           "documents gathered rank by rank [p n n | p n n]; targets assume all positives first",
           CaughtBy::gradient, [](Case&, StepVariant& v) { v.rank_major_documents = true; }},
    Mutant{"dp-sum-on-compensated-loss",
           "all-reduces a sum over the DP group on top of the loss compensated for a mean",
           CaughtBy::gradient, at_strategy<dp_sum_on_compensated>},
    Mutant{"targets-offset-by-world-rank",
           "offsets the own groups' targets by the world rank, not the DP rank (with replicas)",
           CaughtBy::crash, [](Case&, StepVariant& v) { v.targets_at_world_rank = true; }},
    Mutant{"legacy-padding", "hard-negative padding draws row j+1, which can be the positive",
           CaughtBy::padding,
           [](Case& c, StepVariant&) { c.loss.padding = loss::Padding::legacy; }},
    Mutant{"per-rank-rng", "each rank pads with its own generator seed; ranks disagree on the loss",
           CaughtBy::equal_loss, [](Case& c, StepVariant&) { c.rng_mode = RngMode::per_rank; }},
};

}  // namespace

std::span<const Mutant> mutant_registry() {
  return kMutants;
}

const Mutant* find_mutant(std::string_view name) {
  for (const Mutant& m : kMutants) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

}  // namespace infonce::step
