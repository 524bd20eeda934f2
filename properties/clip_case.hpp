// A CLIP-family case from a generated CaseSpec (issue 13): the spec's
// distributed shape and settings, read for the CLIP loss, so that the CLIP
// family reuses the InfoNCE generator's axes and its RapidCheck shrinking.
//   - DP shard d of micro-step m holds one pair per group of the spec (at
//     least one: a CLIP shard is never empty);
//   - F_image = F_text = the spec's F, D its D; both towers normalised as the
//     spec says, except the text tower when the spec's include_dd is set;
//   - log_logit_scale = log(1 / T), and a logit bias exactly where the spec's
//     include_qq is set (an axis CLIP has no other use for);
//   - mesh, reduction, gather path, dtype, GA from the spec; the numbers from
//     Rng(data_seed), standard normal, the spec's feature style applied to
//     each tower's rows where it means something for CLIP (zero rows,
//     duplicated and collinear rows, magnitudes).
// The InfoNCE-only axes (negatives, hard negatives, padding, the mask,
// per-rank generators, recorded draws, the accumulation window) are ignored.
#pragma once

#include <string>

#include "casefile/case.hpp"
#include "properties/case_spec.hpp"

namespace infonce::properties {

Case build_clip_case(const CaseSpec& spec);

// One line with only what the CLIP case reads from the spec, e.g.
// "W=2 P=2 A=1 pairs=[[1,1]] F=2 D=2 normalize=1/1 T=0.1 bias=0 ...".
std::string describe_clip(const CaseSpec& spec);

}  // namespace infonce::properties
