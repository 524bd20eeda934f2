// A SigLIP case from a generated CaseSpec (SPEC section 15), read as
// clip_case.hpp reads one for CLIP, so the family reuses the InfoNCE
// generator's axes and its RapidCheck shrinking:
//   - DP shard d of micro-step m holds one pair per group of the spec (at
//     least one: a shard is never empty);
//   - F_image = F_text = the spec's F, D its D; the image tower normalised as
//     the spec says, the text tower too unless the spec's include_dd is set;
//   - log_scale = log(1 / T); the bias a draw: 2 x standard normal, minus
//     log of the micro-step's pair count when the spec's include_qq is set
//     (SigLIP starts at a large negative bias, its negatives outnumber pairs);
//   - mesh, reduction, gather path, dtype, GA from the spec; the numbers from
//     Rng(data_seed), standard normal, the spec's feature style applied to
//     each tower's rows (zero rows, duplicated and collinear rows, magnitudes).
// The InfoNCE-only axes are ignored.
#pragma once

#include <string>

#include "casefile/case.hpp"
#include "properties/case_spec.hpp"

namespace infonce::properties {

Case build_siglip_case(const CaseSpec& spec);

// One line with only what the SigLIP case reads from the spec.
std::string describe_siglip(const CaseSpec& spec);

}  // namespace infonce::properties
