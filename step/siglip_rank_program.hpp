// The rank program of the SigLIP family (SPEC section 15): one rank's
// optimizer step for a case with "family": "siglip", composed from the case's
// strategy as the CLIP program is (step/clip_rank_program.hpp), with the rows
// moved by a SigLIP transport (step/siglip_transport.hpp: open_clip's bidir,
// shift, reduce or gather):
//   - local scope (open_clip's SigLipLoss): the rank's own images, live,
//     against every member's texts, pairs at the own slot, divided by its
//     own n; only the texts travel;
//   - global scope: every member's images against every member's texts,
//     divided by the N gathered pairs; both towers' rows travel.
// The gather kind says which travelled rows carry gradient: autograd (back to
// the sender by the transport's reverse), detached-own-live (only the own
// slot's, kept locally), detached (none). log_scale and bias are never
// detached. Then the backward scale, GA and the DDP reduction.
#pragma once

#include "casefile/case.hpp"
#include "sim/communicator.hpp"
#include "step/rank_program.hpp"
#include "step/siglip_transport.hpp"
#include "step/variant.hpp"

namespace infonce::step {

template <class Scalar>
RankOutput<Scalar> run_siglip_rank_program(sim::Communicator& comm, const Case& c,
                                           const StepVariant& variant);

}  // namespace infonce::step
