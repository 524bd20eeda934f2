// mpirun -np W mpi_reduce_scatter_agreement CASES SEED [--native]: CASES
// generated reduce_scatter_v calls, one after another, on the MPI backend;
// world rank 0 then runs the same calls on the fiber simulator and compares
// every member's result, case by case.
//
// A case is a group (the world; a random subset of the ranks in a random
// order; or the DP groups of a random mesh, all at once), an element type,
// shard sizes (often zero, so some members get an empty shard) and each
// member's values, drawn so that their floating-point sum depends on the
// order of the addends. Cases are a function of (W, CASES, SEED) alone.
//
// Default (ordered reduction): every result must be bit-identical; exit 1
// otherwise. --native (MPI_Reduce_scatter, order unspecified): values are
// positive, so each element's relative error is bounded by the member count
// times the element type's epsilon; results must agree within 4x that bound.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "base/rng.hpp"
#include "sim/fiber_simulation.hpp"
#include "sim/mesh.hpp"
#include "sim/mpi/mpi_communicator.hpp"
#include "sim/mpi/mpi_runtime.hpp"
#include "tests/mpi/job_exit_code.hpp"

namespace {

using infonce::Rng;
using infonce::sim::Communicator;
using infonce::sim::Group;

// Ids of the subset groups: distinct per case (MPI_Comm_create_group tells
// concurrent creations apart by the tag derived from the id), above split's.
constexpr std::int32_t kSubsetIdBase = 1000;

struct ScatterCase {
  enum class Shape { world, subset, mesh } shape = Shape::world;
  Group subset;         // subset: the group
  std::int32_t dp = 1;  // mesh: the DP size
  bool single = false;  // float instead of double
  std::uint64_t seed = 0;
};

ScatterCase draw_case(Rng& rng, std::int32_t world, std::int64_t index) {
  ScatterCase c;
  c.shape = static_cast<ScatterCase::Shape>(rng.below(3));
  c.single = rng.below(3) == 0;
  c.seed = rng.next_u64();
  if (c.shape == ScatterCase::Shape::subset) {
    std::vector<std::int32_t> ranks(static_cast<std::size_t>(world));
    for (std::int32_t w = 0; w < world; ++w) ranks[static_cast<std::size_t>(w)] = w;
    for (std::size_t i = ranks.size(); i-- > 1;) {
      std::swap(ranks[i], ranks[static_cast<std::size_t>(rng.below(i + 1))]);
    }
    ranks.resize(static_cast<std::size_t>(rng.between(1, world)));
    c.subset = Group{kSubsetIdBase + static_cast<std::int32_t>(index), ranks};
  }
  if (c.shape == ScatterCase::Shape::mesh) {
    std::vector<std::int32_t> divisors;
    for (std::int32_t d = 1; d <= world; ++d) {
      if (world % d == 0) divisors.push_back(d);
    }
    c.dp = divisors[static_cast<std::size_t>(rng.below(divisors.size()))];
  }
  return c;
}

// The group world rank `w` calls on, or an empty group if it sits this out.
Group group_of(const ScatterCase& c, std::int32_t world, std::int32_t w) {
  switch (c.shape) {
    case ScatterCase::Shape::world:
      return infonce::sim::world_group_of(world);
    case ScatterCase::Shape::subset:
      return c.subset.rank_of(w) >= 0 ? c.subset : Group{-1, {}};
    case ScatterCase::Shape::mesh:
      return infonce::sim::MeshLayout(world, c.dp).dp_group(w);
  }
  return Group{-1, {}};
}

// Shard sizes for a group: a function of the case and the group's members.
std::vector<std::int64_t> counts_of(const ScatterCase& c, const Group& group) {
  Rng rng(infonce::derive_seed(c.seed, static_cast<std::uint64_t>(group.world_ranks[0]) + 1));
  std::vector<std::int64_t> counts;
  for (std::int32_t i = 0; i < group.size(); ++i) {
    counts.push_back(rng.below(4) == 0 ? 0 : rng.between(1, 5));
  }
  return counts;
}

// Member `w`'s values: magnitudes from 2^-30 to 2^30 and both signs (ordered),
// or positive (native: no cancellation, so a relative bound holds).
template <class T>
std::vector<T> values_of(const ScatterCase& c, std::int32_t w, std::int64_t total, bool positive) {
  Rng rng(infonce::derive_seed(c.seed, 1000 + static_cast<std::uint64_t>(w)));
  std::vector<T> values(static_cast<std::size_t>(total));
  for (T& v : values) {
    const double mantissa = 1.0 + rng.unit();
    const double sign = positive || rng.below(2) == 0 ? 1.0 : -1.0;
    v = static_cast<T>(sign * std::ldexp(mantissa / 3.0, static_cast<int>(rng.between(-30, 30))));
  }
  return values;
}

template <class T>
std::vector<std::byte> scatter_as(Communicator& comm, const ScatterCase& c, const Group& group,
                                  bool positive) {
  const std::vector<std::int64_t> counts = counts_of(c, group);
  std::int64_t total = 0;
  for (const std::int64_t n : counts) total += n;
  const auto mine = values_of<T>(c, comm.world_rank(), total, positive);
  const std::vector<T> result = comm.reduce_scatter_v(group, std::span<const T>(mine), counts);
  const auto bytes = std::as_bytes(std::span<const T>(result));
  return {bytes.begin(), bytes.end()};
}

// This rank's result of the case as bytes (empty if it is not a member).
std::vector<std::byte> run_case(Communicator& comm, const ScatterCase& c, bool positive) {
  const Group group = group_of(c, comm.world_size(), comm.world_rank());
  if (group.world_ranks.empty()) return {};
  return c.single ? scatter_as<float>(comm, c, group, positive)
                  : scatter_as<double>(comm, c, group, positive);
}

template <class T>
bool within_bound(std::span<const std::byte> a, std::span<const std::byte> b,
                  std::int32_t members) {
  if (a.size() != b.size()) return false;
  const double bound = 4.0 * members * std::numeric_limits<T>::epsilon();
  for (std::size_t i = 0; i < a.size(); i += sizeof(T)) {
    T x, y;
    std::memcpy(&x, a.data() + i, sizeof(T));
    std::memcpy(&y, b.data() + i, sizeof(T));
    if (!(std::abs(double(x) - double(y)) <= bound * std::abs(double(y)))) return false;
  }
  return true;
}

bool agree(std::span<const std::byte> mpi, const std::vector<std::byte>& fiber,
           const ScatterCase& c, std::int32_t world, bool native) {
  if (!native) return std::ranges::equal(mpi, fiber);
  return c.single ? within_bound<float>(mpi, fiber, world)
                  : within_bound<double>(mpi, fiber, world);
}

int run(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() < 2 || args.size() > 3 || (args.size() == 3 && args[2] != "--native")) {
    throw infonce::InputError("usage: mpi_reduce_scatter_agreement CASES SEED [--native]");
  }
  const std::int64_t count = std::stoll(args[0]);
  const bool native = args.size() == 3;
  infonce::sim::MpiOptions options;
  options.reduction =
      native ? infonce::sim::MpiReduction::native : infonce::sim::MpiReduction::ordered;
  options.stall_timeout_seconds = 60;
  infonce::sim::MpiCommunicator comm(options);
  const std::int32_t world = comm.world_size();

  Rng rng(std::stoull(args[1]));
  std::vector<ScatterCase> cases;
  for (std::int64_t i = 0; i < count; ++i) cases.push_back(draw_case(rng, world, i));

  // On MPI, case by case; world rank 0 keeps every rank's result.
  std::vector<infonce::sim::GatheredObjects> on_mpi;
  for (const ScatterCase& c : cases) {
    on_mpi.push_back(comm.all_gather_object(comm.world(), run_case(comm, c, native)));
  }
  if (comm.world_rank() != 0) return 0;

  std::vector<std::vector<std::vector<std::byte>>> on_fibers(
      cases.size(), std::vector<std::vector<std::byte>>(static_cast<std::size_t>(world)));
  infonce::sim::SimulationOptions sim_options;
  sim_options.world_size = world;
  infonce::sim::run_fibers(sim_options, [&](Communicator& fiber) {
    const auto w = static_cast<std::size_t>(fiber.world_rank());
    for (std::size_t i = 0; i < cases.size(); ++i)
      on_fibers[i][w] = run_case(fiber, cases[i], native);
  });

  std::int64_t agreeing = 0, floats = 0, empty_shards = 0, values = 0;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    bool same = true;
    for (std::size_t w = 0; w < static_cast<std::size_t>(world); ++w) {
      same = same && agree(on_mpi[i][w], on_fibers[i][w], cases[i], world, native);
      const bool member =
          !group_of(cases[i], world, static_cast<std::int32_t>(w)).world_ranks.empty();
      if (member && on_fibers[i][w].empty()) ++empty_shards;
      values += static_cast<std::int64_t>(on_fibers[i][w].size() / (cases[i].single ? 4 : 8));
    }
    if (same) {
      ++agreeing;
    } else {
      std::cout << "case " << i << ": MPI and fiber results differ\n";
    }
    if (cases[i].single) ++floats;
  }
  std::cout << "reduce-scatter, world " << world << (native ? ", MPI_Reduce_scatter" : ", ordered")
            << ": " << agreeing << "/" << cases.size() << " cases "
            << (native ? "within the bound of" : "bit-identical to") << " the fiber backend ("
            << floats << " float, " << cases.size() - static_cast<std::size_t>(floats)
            << " double; " << values << " values received, " << empty_shards << " empty shards)\n";
  return agreeing == count && count > 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  infonce::sim::ensure_mpi_initialized();
  int code = infonce::sim::run_or_abort_job([&] { return run(argc, argv); },
                                            "mpi_reduce_scatter_agreement",
                                            infonce::mpi_test::job_exit_code);
  // Every rank exits with world rank 0's verdict.
  infonce::sim::MpiCommunicator comm;
  double shared = code;
  comm.broadcast(comm.world(), std::span(&shared, 1), 0);
  return static_cast<int>(shared);
}
