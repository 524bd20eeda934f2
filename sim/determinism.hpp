// Determinism self-check: run a program several times, under FIFO and seeded
// random schedules, hash everything it produced and report the first
// divergence. Results of a correct simulation depend on the program alone,
// never on the interleaving.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "sim/fiber_simulation.hpp"

namespace infonce::sim {

// FNV-1a, 64 bit, written out so a hash means the same on every platform.
inline constexpr std::uint64_t kFnvOffsetBasis = 0xcbf29ce484222325ULL;
inline constexpr std::uint64_t kFnvPrime = 0x100000001b3ULL;

constexpr std::uint64_t fnv1a64(std::span<const std::byte> bytes,
                                std::uint64_t hash = kFnvOffsetBasis) {
  for (const std::byte b : bytes) {
    hash ^= static_cast<std::uint64_t>(b);
    hash *= kFnvPrime;
  }
  return hash;
}

// Hashes the 8 bytes of `value`, least significant first (independent of the
// machine's byte order).
constexpr std::uint64_t fnv1a64_u64(std::uint64_t value, std::uint64_t hash = kFnvOffsetBasis) {
  for (int i = 0; i < 8; ++i) {
    hash ^= (value >> (8 * i)) & 0xffU;
    hash *= kFnvPrime;
  }
  return hash;
}

// A rank program that returns everything it produced, serialized.
using RecordingProgram = std::function<std::vector<std::byte>(Communicator&)>;

// What one run produced.
struct RunRecord {
  // outputs[w]: world rank w's bytes. Empty when the run failed: which ranks
  // got how far before a failure stopped them is up to the schedule.
  std::vector<std::vector<std::byte>> outputs;
  std::optional<std::string> error;  // the SimulationError's message if the run failed

  // FNV-1a over: rank count, then per rank its byte count and bytes, then a
  // failure flag and the error message.
  std::uint64_t hash() const;
};

RunRecord run_recorded(const SimulationOptions& options, const RecordingProgram& program);

struct DeterminismReport {
  bool deterministic = true;
  std::vector<std::string> runs;      // "fifo#0", "fifo#1", "random(7)#0", ...
  std::vector<std::uint64_t> hashes;  // RunRecord::hash of each run
  std::string first_divergence;       // empty when deterministic
};

// Runs `program` twice under each schedule (replacing options.schedule; all
// other options, including reduction_order_seed, are kept) and compares every
// run with the first. The first divergence names the run, the rank and the
// byte offset, or the differing errors.
DeterminismReport check_determinism(const SimulationOptions& options,
                                    const RecordingProgram& program,
                                    std::span<const Schedule> schedules);

// FIFO, then random with seeds 1, 2 and 3.
std::vector<Schedule> default_schedules();

}  // namespace infonce::sim
