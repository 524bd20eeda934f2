// The knobs by which a known-wrong variant of the rank program ("mutant")
// differs from the correct one. The default value of every knob is the
// correct program; each mutant in the registry (step/mutants.cpp) sets one.
// A mutant that is a point of the strategy space sets `strategy_rule`: the
// strategy the step runs, as a function of the case (the trainer's own rule,
// effective_strategy, is itself one: it scales only where the fix applies).
#pragma once

#include "casefile/case.hpp"
#include "step/siglip_transport.hpp"

namespace infonce::step {

enum class AccumulationScaling {
  once,     // correct: divide by A once when GA normalisation is on
  missing,  // wrong: never divide
  twice,    // wrong: divide by A twice
};

using StrategyRule = Strategy (*)(const Case&);

struct StepVariant {
  StrategyRule strategy_rule = nullptr;  // nullptr: effective_strategy (the case's)
  bool scale_reported_loss = false;      // wrong: report s * L instead of L
  bool own_slot_at_world_rank = false;   // wrong: own live rows at the world rank's slot
  AccumulationScaling accumulation = AccumulationScaling::once;
  bool window_by_configured_steps = false;  // wrong: a partial window divided by A, not A'
  bool rank_major_documents = false;   // wrong: docs gathered rank by rank, targets positives-first
  bool targets_at_world_rank = false;  // wrong: own groups' targets offset by the world rank
  bool labels_ungathered = false;      // wrong (tensor path): embeddings gathered, labels not
  // Not a slip: how a SigLIP step moves its rows (every transport is correct;
  // open_clip's default is bidir).
  SigLipTransport siglip_transport = SigLipTransport::bidir;
};

// The strategy the step of `c` runs under `variant`.
inline Strategy strategy_of(const Case& c, const StepVariant& variant) {
  return variant.strategy_rule != nullptr ? variant.strategy_rule(c) : effective_strategy(c);
}

}  // namespace infonce::step
