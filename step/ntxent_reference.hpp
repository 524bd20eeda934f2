// The full-batch reference of an NT-Xent case (SPEC sections 4 and 14): for
// each micro-step the NT-Xent loss over the union of every DP shard's
// samples (first views in shard order, then second views), divided by A when
// GA normalisation is on, summed over micro-steps; its exact gradient with
// respect to the shared encoder and, with a learnable temperature, the
// inverse temperature.
#pragma once

#include "casefile/case.hpp"
#include "step/run_case.hpp"

namespace infonce::step {

// Throws InputError where the loss is undefined (loss/ntxent.hpp).
ReferenceValues compute_ntxent_reference(const Case& c);

// Every shard's rows of one view, stacked in shard order.
Matrix<double> ntxent_view_union(const std::vector<NtXentShardBatch>& shards, bool first);

}  // namespace infonce::step
