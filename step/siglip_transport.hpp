// How a SigLIP rank program moves embedding rows between the members of its
// gather group, and how the gradient of the rows it received goes back
// (SPEC sections 15 and 16). The four ways open_clip's SigLipLoss offers
// (dist_impl):
//   - bidir: neighbour exchanges in both directions at once, floor((P-1)/2)
//     of them, then one shift to the next member when P-1 is odd;
//   - shift: P-1 shifts to the next member, each forwarding what came last;
//   - reduce: P all-reduces of the rows masked to member i's (rank == i);
//   - gather: an all-gather (on the case's object or tensor path).
// With autograd, a received block's gradient goes back to its sender by the
// reverse message (the ring transports: what a member forwarded comes back
// to it, added to its own share, before it returns it), or by the
// collective's backward (all-reduce, reduce-scatter). Every transport hands
// the loss the same rows, slot by slot; only the order in which the
// gradient's shares are summed differs. Written against Communicator only.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "casefile/case.hpp"
#include "loss/matrix.hpp"
#include "sim/communicator.hpp"
#include "step/gather.hpp"

namespace infonce::step {

enum class SigLipTransport { bidir, shift, reduce, gather };

inline constexpr std::array<EnumName<SigLipTransport>, 4> kSigLipTransportNames{{
    {SigLipTransport::bidir, "bidir"},
    {SigLipTransport::shift, "shift"},
    {SigLipTransport::reduce, "reduce"},
    {SigLipTransport::gather, "gather"},
}};

// Every member's rows in slot order (AssembledRows: the rank's own live rows
// in slot `own_slot`), moved by `transport`; `path` is the gather's.
template <class Scalar>
AssembledRows<Scalar> exchange_rows(sim::Communicator& comm, const sim::Group& group,
                                    SigLipTransport transport, GatherPath path,
                                    const Matrix<Scalar>& local, std::int32_t own_slot);

// The autograd backward of exchange_rows: given this member's dL/d(rows of
// every slot), the gradient of its own rows summed over every member, each
// share travelling back as `transport` moved the rows out.
template <class Scalar>
Matrix<Scalar> returned_gradient(sim::Communicator& comm, const sim::Group& group,
                                 SigLipTransport transport, const Matrix<Scalar>& grad_rows,
                                 const std::vector<std::int64_t>& slot_rows, std::int32_t own_slot);

}  // namespace infonce::step
