// A ring step over point-to-point messages (SPEC section 16): the neighbour
// exchange that ring-based losses (SigLIP's) build on. Only send and recv:
// the same on the fiber simulator and on MPI.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "base/error.hpp"
#include "sim/communicator.hpp"

namespace infonce::sim {

enum class RingDirection {
  to_next,      // member d sends to (d + 1) mod P, receives from (d - 1) mod P
  to_previous,  // member d sends to (d - 1) mod P, receives from (d + 1) mod P
};

// One step: sends `mine` one place along the ring and returns the `incoming`
// values the neighbour on the other side sent. Sends are buffered, so every
// member sending first cannot deadlock. A group of one member gets its own
// values back without a message.
template <class T>
std::vector<T> ring_shift(Communicator& comm, const Group& group, std::span<const T> mine,
                          std::size_t incoming, RingDirection direction) {
  const std::int32_t size = group.size();
  const std::int32_t me = group.rank_of(comm.world_rank());
  if (me < 0) throw InputError("ring_shift: the caller is not a member of the group");
  if (size == 1) {
    if (incoming != mine.size()) throw InputError("ring_shift: one member, but sizes differ");
    return {mine.begin(), mine.end()};
  }
  const std::int32_t next = (me + 1) % size;
  const std::int32_t previous = (me + size - 1) % size;
  const bool forward = direction == RingDirection::to_next;
  comm.send(group, forward ? next : previous, mine);
  std::vector<T> out(incoming);
  comm.recv(group, forward ? previous : next, std::span<T>(out));
  return out;
}

}  // namespace infonce::sim
