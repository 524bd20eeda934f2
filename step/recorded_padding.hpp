// Recording the hard-negative padding draws of a step, so that another
// framework (tests/torch/ddp_conformance.py) can replay a generated case
// without reproducing our generator: `padding_draws` of the case file
// (MODEL.md section 7) then replaces the generators.
#pragma once

#include "casefile/case.hpp"
#include "loss/padding.hpp"

namespace infonce::step {

// The indices the step's hard-negative generators draw, [micro][dp rank][draw],
// in the order the trainer draws them: stream d is the generator of DP shard
// d's first replica (world rank d * R), running on across micro-steps; with
// use_batch it pads the gathered batch (every shard's groups in DP order),
// without it shard d's own groups. Each group with k < H negatives takes H - k
// draws in one go, groups in order. Empty lists when hard_negatives is unset.
//
// A case that already records its draws gets them back unchanged (they are
// what its step uses). Throws InputError for an invalid case (validate_case)
// and where the step would (a group with no negative under hard_negatives).
//
// rng mode per-rank: the recording holds, per DP shard, the stream of its
// first replica (seed + d * R). Recorded draws feed every replica of a shard,
// so with R > 1 the replicas r > 0 then pad like replica 0 instead of with
// their own seed + d * R + r: the recorded case is a different (single
// objective) step. In synced mode every rank draws the same stream and the
// recorded case is the same step, bit for bit.
loss::RecordedDraws record_padding_draws(const Case& c);

// `c` with padding_draws set to record_padding_draws(c) (unchanged if
// hard_negatives is unset: nothing is drawn).
Case with_recorded_padding(Case c);

}  // namespace infonce::step
