// Every rank of a world as a Boost.Fiber fiber on the calling thread, under a
// seeded scheduler. Collectives are fake (in-memory) but keep real semantics;
// misuse and hangs become SimulationError, never a hang of the process.
//
// Semantics of the fake collectives (the MPI backend matches them):
// - A group is its id plus its ordered member list; members' k-th calls on a
//   group form its collective #k. Results are in group-rank order, never in
//   arrival order, and do not depend on the schedule.
// - all_reduce sums element-wise in group-rank order, left to right
//   (((v0 + v1) + v2) + ...), in the element type; mean is that sum divided
//   by the member count. With reduction_order_seed the order is a permutation
//   drawn per collective from (seed, group, collective number).
// - reduce_scatter_v: member i gets shard i (counts[i] values) summed over the
//   members in that same order. all_gather_object's result views one buffer
//   built once per collective and shared by every member's result.
// - broadcast's root is a group rank. split: members with the same color >= 0
//   form a group ordered by (key, world rank); ids are 1, 2, ... in order of
//   split calls and ascending colors; color < 0 gives Group{-1, {}}.
// - Failures (first one wins): members calling different collectives, or
//   different sizes/ops/roots/counts where they must agree (reduce_scatter_v:
//   every member gives sum(counts) values); a caller not in
//   the group or a malformed group; a deadlock (every live rank blocked, e.g.
//   a rank returned or called on another group); a rank's exception, which
//   stays reachable through std::rethrow_if_nested on the SimulationError.
// - Point-to-point (SPEC 16): send is buffered, per-(group, sender, receiver)
//   FIFO; a recv waits for its channel's next message, which must have its
//   element type and count. A recv no send can satisfy is part of the
//   deadlock check; a message never received fails the run when it ends.
//   Every rank is then unwound (SimulationAborted, not a std::exception, is
//   thrown from its collectives: a program must not swallow it with catch (...)).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>

#include "sim/communicator.hpp"

namespace infonce::sim {

enum class ScheduleKind { fifo, random };

struct Schedule {
  ScheduleKind kind = ScheduleKind::fifo;
  std::uint64_t seed = 0;  // random: the interleaving is a function of this seed alone
};

// Fault sites a test can switch on, one per run (FoundationDB style).
struct FaultInjection {
  std::int32_t rank = -1;          // the rank that misbehaves; -1: none
  std::int64_t at_collective = 0;  // its n-th call (0-based): collective, send or recv
  enum class Kind {
    none,
    wrong_collective,  // calls a different collective kind
    wrong_group,       // calls it on a different group
    wrong_size,        // gives a different element count where counts must agree (a send: one more)
    early_return,      // returns instead of calling (others then wait forever)
    throw_error,       // throws from the rank program
    drop_message,      // a send whose message is lost (its receiver waits for it)
  } kind = Kind::none;
};

struct SimulationOptions {
  std::int32_t world_size = 1;
  Schedule schedule;
  // If set, all_reduce sums in an order permuted by this seed (per call),
  // modelling real reduction non-determinism.
  std::optional<std::uint64_t> reduction_order_seed;
  FaultInjection fault;
  // Virtual size of each rank's stack, committed lazily (a rank costs only
  // the pages it touches, ~8 KiB for small programs), with a guard page below.
  // 256 KiB rather than 64: Eigen places temporaries of up to 128 KiB on the
  // stack (EIGEN_STACK_ALLOCATION_LIMIT) and sanitizer builds double frame
  // sizes. Big data belongs on the heap in any case. Allowed: 16 KiB..64 MiB.
  std::size_t fiber_stack_bytes = 256 * 1024;
};

using RankProgram = std::function<void(Communicator&)>;

// Runs `program` once per world rank, each on its own fiber, until all have
// returned. Throws SimulationError (naming the collective's sequence number,
// kind, group and ranks) on collective misuse, deadlock, or a rank's exception;
// InputError for invalid options. Callable any number of times per thread
// (not from inside a rank). Same options and program => same interleaving.
void run_fibers(const SimulationOptions& options, const RankProgram& program);

}  // namespace infonce::sim
