// SPEC sections 14 and 4 for NT-Xent: a micro-step's batch is the union of
// every DP shard's samples in shard order, laid out as 2N rows: every first
// view, then every second view. Reading a description into batches is also
// where an undefined case is rejected.
#pragma once

#include <vector>

#include "oracle/ntxent_description.hpp"
#include "oracle/real.hpp"

namespace infonce::oracle {

// The 2N feature rows of one micro-step: rows 0..N-1 the first views of
// samples 0..N-1, rows N..2N-1 their second views.
struct NtXentBatch {
  RealRows features;  // 2N x F
};

// One batch per micro-step. Throws InputError where the objective is
// undefined: no micro-step, a micro-step without shards, a shard without
// samples or whose views disagree in rows or in width, a width that is not
// W's, a non-finite number, or a temperature that is not finite and positive.
std::vector<NtXentBatch> ntxent_batches(const NtXentDescription& description);

}  // namespace infonce::oracle
