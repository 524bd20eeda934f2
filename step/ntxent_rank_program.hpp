// The rank program of the NT-Xent family (SPEC section 14): one rank's
// optimizer step for a case with "family": "ntxent", composed from the
// case's strategy as the CLIP program is (step/clip_rank_program.cpp): the
// shared encoder embeds both views of the rank's samples, each view's rows
// are gathered over the DP group (step/gather.hpp) and laid out as every
// first view, then every second view; the loss runs over all gathered rows
// (global) or over the rank's own 2 n_d rows as queries against all of them
// (local: each query knows its own position, kept out of its softmax, and its
// positive's); the gradient reaches the rank's own rows by the gather kind.
// A learnable inverse temperature is never detached. Then the backward scale,
// GA and the DDP reduction.
#pragma once

#include "casefile/case.hpp"
#include "sim/communicator.hpp"
#include "step/rank_program.hpp"
#include "step/variant.hpp"

namespace infonce::step {

template <class Scalar>
RankOutput<Scalar> run_ntxent_rank_program(sim::Communicator& comm, const Case& c,
                                           const StepVariant& variant);

}  // namespace infonce::step
