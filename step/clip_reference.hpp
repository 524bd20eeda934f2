// The full-batch reference of a CLIP-family case (MODEL.md section 4 for
// CLIP): for each micro-step the symmetric CLIP loss over the union of every
// DP shard's pairs, in shard order, divided by A when GA normalisation is on,
// summed over micro-steps; its exact gradient with respect to both towers
// (laid out as Case::weight, image columns first) and the direct parameters.
#pragma once

#include "casefile/case.hpp"
#include "step/run_case.hpp"

namespace infonce::step {

// Throws InputError where the loss is undefined (loss/clip.hpp).
ReferenceValues compute_clip_reference(const Case& c);

}  // namespace infonce::step
