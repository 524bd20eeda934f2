// An NT-Xent case from a generated CaseSpec (SPEC section 14), read as
// clip_case.hpp reads one for CLIP, so the family reuses the InfoNCE
// generator's axes and its RapidCheck shrinking:
//   - DP shard d of micro-step m holds one sample per group of the spec (at
//     least one: a shard is never empty);
//   - F and D the spec's; the encoder normalised as the spec says; T the
//     spec's temperature;
//   - a sample's second view is its first plus noise (a real augmentation)
//     unless the spec's include_dd is set (then an unrelated draw);
//   - mesh, reduction, gather path, dtype, GA from the spec; the numbers from
//     Rng(data_seed), standard normal, the spec's feature style applied to
//     the first views where it means something (zero rows, duplicated and
//     collinear rows, magnitudes).
// The InfoNCE-only axes are ignored; a learnable temperature is the caller's
// (Case::learnable_temperature).
#pragma once

#include <string>

#include "casefile/case.hpp"
#include "properties/case_spec.hpp"

namespace infonce::properties {

Case build_ntxent_case(const CaseSpec& spec);

// One line with only what the NT-Xent case reads from the spec.
std::string describe_ntxent(const CaseSpec& spec);

}  // namespace infonce::properties
