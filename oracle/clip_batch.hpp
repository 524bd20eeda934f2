// SPEC section 11 and 4 for CLIP: a micro-step's batch is the union of every
// DP shard's pairs, in shard order. Reading a description into batches is
// also where an undefined case is rejected.
#pragma once

#include <vector>

#include "oracle/clip_description.hpp"
#include "oracle/real.hpp"

namespace infonce::oracle {

// The N pairs of one micro-step: row i of each is pair i.
struct ClipBatch {
  RealRows image;  // N x F_image
  RealRows text;   // N x F_text
};

// One batch per micro-step. Throws InputError where the objective is
// undefined: no micro-step, a micro-step without pairs, a shard without
// pairs or with image and text rows that disagree, a feature width that is
// not its tower's, towers of different D, a non-finite number, or a
// log_scale whose exp overflows.
std::vector<ClipBatch> clip_batches(const ClipDescription& description);

}  // namespace infonce::oracle
