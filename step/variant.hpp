// The knobs by which a known-wrong variant of the rank program ("mutant")
// differs from the correct one. The default value of every knob is the
// correct program; each mutant in the registry flips one.
#pragma once

namespace infonce::step {

enum class ScaleCount {
  dp_shards,   // correct: the number of gathered DP shards (P)
  world_size,  // wrong: counts sequence/tensor-parallel replicas too (W)
};

enum class AccumulationScaling {
  once,     // correct: divide by A once when GA normalisation is on
  missing,  // wrong: never divide
  twice,    // wrong: divide by A twice
};

struct StepVariant {
  ScaleCount scale_count = ScaleCount::dp_shards;
  bool scale_reported_loss = false;       // wrong: report s * L instead of L
  bool compensate_under_sum = false;      // wrong: scale even when the reducer sums
  bool compensate_without_batch = false;  // wrong: scale by P even when use_batch is false
  bool own_slot_at_world_rank = false;    // wrong: own live rows at the world rank's slot
  AccumulationScaling accumulation = AccumulationScaling::once;
  bool window_by_configured_steps = false;  // wrong: a partial window divided by A, not A'
  bool rank_major_documents = false;   // wrong: docs gathered rank by rank, targets positives-first
  bool sum_reduce_under_mean = false;  // wrong: DP-group sum of a gradient compensated for a mean
  bool targets_at_world_rank = false;  // wrong: own groups' targets offset by the world rank
  bool labels_ungathered = false;      // wrong (tensor path): embeddings gathered, labels not
};

}  // namespace infonce::step
