// The rank program of the CLIP family (issue 13, point 4): one rank's
// optimizer step for a case with "family": "clip", composed from the case's
// strategy as the InfoNCE program is (step/rank_program.cpp): both towers
// encode the rank's pairs, each tower's rows are gathered over the DP group
// (step/gather.hpp), the symmetric loss runs over the global batch or over the
// rank's own queries (targets offset by its row prefix), and the gradient
// reaches the rank's own rows by the gather kind. The direct parameters (the
// log logit scale, the bias) are never detached: every rank holds their whole
// gradient of its own loss. Then the backward scale, GA and the DDP reduction.
#pragma once

#include "casefile/case.hpp"
#include "sim/communicator.hpp"
#include "step/rank_program.hpp"
#include "step/variant.hpp"

namespace infonce::step {

template <class Scalar>
RankOutput<Scalar> run_clip_rank_program(sim::Communicator& comm, const Case& c,
                                         const StepVariant& variant);

}  // namespace infonce::step
