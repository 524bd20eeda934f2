// The full-batch reference of a SigLIP case (SPEC sections 4 and 15): for
// each micro-step the SigLIP loss over the union of every DP shard's pairs,
// in shard order (every image against every text, divided by the N pairs),
// divided by A when GA normalisation is on, summed over micro-steps; its
// exact gradient with respect to both towers (laid out as Case::weight,
// image columns first), log_scale and bias.
#pragma once

#include "casefile/case.hpp"
#include "step/run_case.hpp"

namespace infonce::step {

// Throws InputError where the loss is undefined (loss/siglip.hpp).
ReferenceValues compute_siglip_reference(const Case& c);

}  // namespace infonce::step
