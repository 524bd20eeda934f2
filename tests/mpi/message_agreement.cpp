// mpirun -np W mpi_message_agreement PROGRAMS SEED: PROGRAMS generated
// point-to-point programs (SPEC section 16), one after another, on the MPI
// backend; world rank 0 then runs the same programs on the fiber simulator
// and compares every member's received bytes, program by program.
//
// A program is a group (the world; a random subset of the ranks in a random
// order; or the DP groups of a random mesh, all at once) and either ring
// steps (to the next member, to the previous one, or both at once, 1 to 3
// rounds, each round passing on what the last one received) or a chain of
// pairwise messages in one fixed order. Element type and per-member sizes
// (often zero) are drawn too. Programs are a function of (W, PROGRAMS, SEED).
// Every program ends with check_messages_delivered. Exit 0 if every program
// is bit-identical on both backends, 1 otherwise.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "base/rng.hpp"
#include "sim/fiber_simulation.hpp"
#include "sim/mesh.hpp"
#include "sim/mpi/mpi_communicator.hpp"
#include "sim/mpi/mpi_runtime.hpp"
#include "sim/ring.hpp"
#include "tests/mpi/job_exit_code.hpp"

namespace {

using infonce::Rng;
using infonce::sim::Communicator;
using infonce::sim::Group;
using infonce::sim::RingDirection;

constexpr std::int32_t kSubsetIdBase = 1000;

struct MessageProgram {
  enum class Shape { world, subset, mesh } shape = Shape::world;
  enum class Pattern { ring_next, ring_previous, ring_both, chain } pattern = Pattern::ring_next;
  Group subset;
  std::int32_t dp = 1;
  bool single = false;
  std::int32_t rounds = 1;
  std::uint64_t seed = 0;
};

MessageProgram draw_program(Rng& rng, std::int32_t world, std::int64_t index) {
  MessageProgram p;
  p.shape = static_cast<MessageProgram::Shape>(rng.below(3));
  p.pattern = static_cast<MessageProgram::Pattern>(rng.below(4));
  p.single = rng.below(3) == 0;
  p.rounds = static_cast<std::int32_t>(rng.between(1, 3));
  p.seed = rng.next_u64();
  if (p.shape == MessageProgram::Shape::subset) {
    std::vector<std::int32_t> ranks(static_cast<std::size_t>(world));
    for (std::int32_t w = 0; w < world; ++w) ranks[static_cast<std::size_t>(w)] = w;
    for (std::size_t i = ranks.size(); i-- > 1;) {
      std::swap(ranks[i], ranks[static_cast<std::size_t>(rng.below(i + 1))]);
    }
    ranks.resize(static_cast<std::size_t>(rng.between(1, world)));
    p.subset = Group{kSubsetIdBase + static_cast<std::int32_t>(index), ranks};
  }
  if (p.shape == MessageProgram::Shape::mesh) {
    std::vector<std::int32_t> divisors;
    for (std::int32_t d = 1; d <= world; ++d) {
      if (world % d == 0) divisors.push_back(d);
    }
    p.dp = divisors[static_cast<std::size_t>(rng.below(divisors.size()))];
  }
  return p;
}

Group group_of(const MessageProgram& p, std::int32_t world, std::int32_t w) {
  switch (p.shape) {
    case MessageProgram::Shape::world:
      return infonce::sim::world_group_of(world);
    case MessageProgram::Shape::subset:
      return p.subset.rank_of(w) >= 0 ? p.subset : Group{-1, {}};
    case MessageProgram::Shape::mesh:
      return infonce::sim::MeshLayout(world, p.dp).dp_group(w);
  }
  return Group{-1, {}};
}

// A stream per (program, group, purpose): every member draws the same.
Rng stream(const MessageProgram& p, const Group& group, std::uint64_t purpose) {
  return Rng(infonce::derive_seed(
      infonce::derive_seed(p.seed, static_cast<std::uint64_t>(group.world_ranks[0]) + 1), purpose));
}

template <class T>
std::vector<T> values_of(const MessageProgram& p, std::int32_t member, std::size_t count,
                         std::uint64_t round) {
  Rng rng(infonce::derive_seed(p.seed, 1000 * round + static_cast<std::uint64_t>(member)));
  std::vector<T> values(count);
  for (T& v : values) {
    v = static_cast<T>((rng.below(2) == 0 ? 1 : -1) *
                       std::ldexp(1.0 + rng.unit(), static_cast<int>(rng.between(-30, 30))));
  }
  return values;
}

template <class T>
void record(std::vector<std::byte>& out, const std::vector<T>& values) {
  const auto bytes = std::as_bytes(std::span<const T>(values));
  out.insert(out.end(), bytes.begin(), bytes.end());
}

// Ring rounds: member m starts with size_of(m) values and passes on what it
// received; the incoming size is the neighbour's at that round.
template <class T>
void run_ring(Communicator& comm, const MessageProgram& p, const Group& group,
              std::vector<std::byte>& out) {
  const std::int32_t size = group.size();
  const std::int32_t me = group.rank_of(comm.world_rank());
  Rng sizes = stream(p, group, 1);
  std::vector<std::size_t> size_of;
  for (std::int32_t m = 0; m < size; ++m)
    size_of.push_back(sizes.below(4) == 0 ? 0 : sizes.between(1, 5));
  const auto held = [&](std::int32_t m, std::int32_t round, bool next) {
    // After `round` steps toward `next`, member m holds member (m -+ round)'s values.
    const std::int32_t origin = next ? ((m - round) % size + size) % size : (m + round) % size;
    return size_of[static_cast<std::size_t>(origin)];
  };
  std::vector<T> forward = values_of<T>(p, me, size_of[static_cast<std::size_t>(me)], 0);
  std::vector<T> backward = forward;
  for (std::int32_t round = 1; round <= p.rounds; ++round) {
    const bool next = p.pattern != MessageProgram::Pattern::ring_previous;
    const bool both = p.pattern == MessageProgram::Pattern::ring_both;
    forward =
        infonce::sim::ring_shift<T>(comm, group, forward, held(me, round, next),
                                    next ? RingDirection::to_next : RingDirection::to_previous);
    record(out, forward);
    if (both) {
      backward = infonce::sim::ring_shift<T>(comm, group, backward, held(me, round, false),
                                             RingDirection::to_previous);
      record(out, backward);
    }
  }
}

// A chain of pairwise messages in one order every member follows: a sender
// sends, a receiver receives (buffered sends: no order of them deadlocks).
template <class T>
void run_chain(Communicator& comm, const MessageProgram& p, const Group& group,
               std::vector<std::byte>& out) {
  const std::int32_t size = group.size();
  if (size < 2) return;
  const std::int32_t me = group.rank_of(comm.world_rank());
  Rng rng = stream(p, group, 2);
  const auto messages = rng.between(1, 8);
  for (std::int64_t k = 0; k < messages; ++k) {
    const auto from = static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(size)));
    auto to = static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(size - 1)));
    if (to >= from) ++to;
    const std::size_t count = rng.below(4) == 0 ? 0 : rng.between(1, 5);
    if (me == from) {
      const std::vector<T> values = values_of<T>(p, from, count, static_cast<std::uint64_t>(k) + 1);
      comm.send(group, to, std::span<const T>(values));
    } else if (me == to) {
      std::vector<T> got(count);
      comm.recv(group, from, std::span<T>(got));
      record(out, got);
    }
  }
}

// This rank's received bytes for the program (empty if it is not a member).
std::vector<std::byte> run_program(Communicator& comm, const MessageProgram& p) {
  std::vector<std::byte> out;
  const Group group = group_of(p, comm.world_size(), comm.world_rank());
  if (!group.world_ranks.empty()) {
    if (p.pattern == MessageProgram::Pattern::chain) {
      p.single ? run_chain<float>(comm, p, group, out) : run_chain<double>(comm, p, group, out);
    } else {
      p.single ? run_ring<float>(comm, p, group, out) : run_ring<double>(comm, p, group, out);
    }
  }
  comm.check_messages_delivered();
  return out;
}

int run(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() != 2) throw infonce::InputError("usage: mpi_message_agreement PROGRAMS SEED");
  const std::int64_t count = std::stoll(args[0]);
  infonce::sim::MpiOptions options;
  options.stall_timeout_seconds = 60;
  infonce::sim::MpiCommunicator comm(options);
  const std::int32_t world = comm.world_size();
  Rng rng(std::stoull(args[1]));
  std::vector<MessageProgram> programs;
  for (std::int64_t i = 0; i < count; ++i) programs.push_back(draw_program(rng, world, i));
  std::vector<infonce::sim::GatheredObjects> on_mpi;
  for (const MessageProgram& p : programs) {
    on_mpi.push_back(comm.all_gather_object(comm.world(), run_program(comm, p)));
  }
  if (comm.world_rank() != 0) return 0;
  std::vector<std::vector<std::vector<std::byte>>> on_fibers(
      programs.size(), std::vector<std::vector<std::byte>>(static_cast<std::size_t>(world)));
  infonce::sim::SimulationOptions sim_options;
  sim_options.world_size = world;
  infonce::sim::run_fibers(sim_options, [&](Communicator& fiber) {
    const auto w = static_cast<std::size_t>(fiber.world_rank());
    for (std::size_t i = 0; i < programs.size(); ++i)
      on_fibers[i][w] = run_program(fiber, programs[i]);
  });
  std::int64_t agreeing = 0, bytes = 0, rings = 0;
  for (std::size_t i = 0; i < programs.size(); ++i) {
    bool same = true;
    for (std::size_t w = 0; w < static_cast<std::size_t>(world); ++w) {
      same = same && std::ranges::equal(on_mpi[i][w], on_fibers[i][w]);
      bytes += static_cast<std::int64_t>(on_fibers[i][w].size());
    }
    if (same) {
      ++agreeing;
    } else {
      std::cout << "program " << i << ": MPI and fiber results differ\n";
    }
    if (programs[i].pattern != MessageProgram::Pattern::chain) ++rings;
  }
  std::cout << "messages, world " << world << ": " << agreeing << "/" << programs.size()
            << " programs bit-identical to the fiber backend (" << rings << " ring, "
            << programs.size() - static_cast<std::size_t>(rings) << " chain; " << bytes
            << " bytes received)\n";
  return agreeing == count && count > 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  infonce::sim::ensure_mpi_initialized();
  int code = infonce::sim::run_or_abort_job(
      [&] { return run(argc, argv); }, "mpi_message_agreement", infonce::mpi_test::job_exit_code);
  infonce::sim::MpiCommunicator comm;
  double shared = code;
  comm.broadcast(comm.world(), std::span(&shared, 1), 0);
  return static_cast<int>(shared);
}
