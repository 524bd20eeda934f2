// Every rank of a world as a Boost.Fiber fiber on the calling thread, under a
// seeded scheduler. Collectives are fake (in-memory) but keep real semantics;
// misuse and hangs become SimulationError, never a hang of the process.
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
  std::int32_t rank = -1;              // the rank that misbehaves; -1: none
  std::int64_t at_collective = 0;      // its n-th collective call (0-based)
  enum class Kind {
    none,
    wrong_collective,  // calls a different collective kind
    wrong_group,       // calls it on a different group
    wrong_size,        // gives a different element count where counts must agree
    early_return,      // returns instead of calling (others then wait forever)
    throw_error,       // throws from the rank program
  } kind = Kind::none;
};

struct SimulationOptions {
  std::int32_t world_size = 1;
  Schedule schedule;
  // If set, all_reduce sums in an order permuted by this seed (per call),
  // modelling real reduction non-determinism.
  std::optional<std::uint64_t> reduction_order_seed;
  FaultInjection fault;
  std::size_t fiber_stack_bytes = 64 * 1024;
};

using RankProgram = std::function<void(Communicator&)>;

// Runs `program` once per world rank, each on its own fiber, until all have
// returned. Throws SimulationError (naming the collective's sequence number,
// kind, group and ranks) on collective misuse, deadlock, or a rank's exception.
void run_fibers(const SimulationOptions& options, const RankProgram& program);

}  // namespace infonce::sim
