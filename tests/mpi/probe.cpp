// mpirun -np W mpi_probe MODE: the MPI Communicator on its own.
//
// MODE conformance: a program that calls every collective (split with keys
// that reverse the order and a color < 0, MeshLayout groups that were never
// split, all_gather / all_gather_v / all_gather_object / all_reduce sum and
// mean in double and float with values whose sum depends on the order,
// reduce_scatter_v with unequal and empty shards, broadcast, barrier) runs on MPI; world rank 0
// runs the same program on the fiber simulator and the two must produce the same bytes on every
// rank. Exit 0 if so, 1 if not.
//
// The other modes make one rank misbehave; the job must end (never hang) with
// the error on stderr and exit 2 (InputError), 3 (SimulationError) or 4:
//   throw            world rank 1 throws InputError while the others gather
//   wrong-size       world rank 1 gives one value more to an all_gather
//   wrong-collective world rank 1 calls barrier where the others all_reduce
//   counts-mismatch  all_gather_v where a rank gives fewer values than counts says
//   counts-differ    all_gather_v where members pass different counts
//   scatter-size     reduce_scatter_v where a rank gives fewer values than the counts sum to
//   scatter-counts-differ  reduce_scatter_v where members pass different counts
//   bad-root         broadcast from a root outside the group
//   not-member       world rank 1 calls a collective on a group without it
//   early-return     world rank 1 skips the all_gather and goes on to the final
//                    barrier, which meets the others' all_gather
//   wrong-group      world rank 1 calls on another group than the others: they
//                    wait (stall timeout 2 s)
//   exit-early       world rank 1 leaves the program (and MPI) while the others
//                    wait in a collective (stall timeout 2 s)
//   message-size     world rank 1 receives 3 values where rank 0 sent 2
//   message-type     world rank 1 receives floats where rank 0 sent doubles
//   missing-send     world rank 2 waits for a message nobody sends (stall timeout 2 s)
//   unreceived       world rank 2 sends to rank 0, which never receives it
//   message-peer     every rank sends to itself
#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "sim/fiber_simulation.hpp"
#include "sim/mesh.hpp"
#include "sim/mpi/mpi_communicator.hpp"
#include "sim/mpi/mpi_runtime.hpp"
#include "tests/mpi/job_exit_code.hpp"

namespace {

using infonce::sim::Communicator;
using infonce::sim::Group;
using infonce::sim::ReduceOp;

template <class T>
void record(std::vector<std::byte>& out, std::span<const T> values) {
  const auto n = static_cast<std::int64_t>(values.size());
  const auto* size = reinterpret_cast<const std::byte*>(&n);
  out.insert(out.end(), size, size + sizeof n);
  const auto* bytes = reinterpret_cast<const std::byte*>(values.data());
  out.insert(out.end(), bytes, bytes + values.size() * sizeof(T));
}

template <class T>
void record(std::vector<std::byte>& out, const std::vector<T>& values) {
  record(out, std::span<const T>(values));
}

void record_group(std::vector<std::byte>& out, const Group& group) {
  record(out, std::vector<std::int32_t>{group.id});
  record(out, group.world_ranks);
}

// Values whose floating-point sum depends on the order of the addends.
template <class T>
std::vector<T> order_sensitive(std::int32_t rank, std::size_t n) {
  std::vector<T> values(n);
  for (std::size_t i = 0; i < n; ++i) {
    const double sign = (rank + static_cast<std::int32_t>(i)) % 2 == 0 ? 1.0 : -1.0;
    values[i] =
        static_cast<T>(sign * (1.0 + 0.1 * rank) * std::pow(10.0, (rank * 7 + i) % 17) / 3.0);
  }
  return values;
}

std::vector<std::byte> conformance_program(Communicator& comm) {
  std::vector<std::byte> out;
  const std::int32_t w = comm.world_rank();
  const std::int32_t size = comm.world_size();
  // Keys reverse the order inside each color; the last rank joins no group.
  const Group halves = comm.split(w == size - 1 && size > 2 ? -1 : w % 2, size - w);
  record_group(out, halves);
  const Group evens = comm.split(w % 2 == 0 ? 0 : 5, w);
  record_group(out, evens);
  const Group world = comm.world();

  const std::vector<double> mine{w + 0.25, -w * 1.5};
  record(out, comm.all_gather(world, std::span<const double>(mine)));
  const std::vector<std::int64_t> ints{w, w * w, -w};
  record(out, comm.all_gather(evens, std::span<const std::int64_t>(ints)));
  const std::vector<float> floats{static_cast<float>(w) / 3.0F};
  record(out, comm.all_gather(world, std::span<const float>(floats)));

  std::vector<std::int64_t> counts;
  for (std::int32_t i = 0; i < size; ++i) counts.push_back(i % 3);
  const std::vector<double> varied(static_cast<std::size_t>(w % 3), w * 10.0);
  record(out, comm.all_gather_v(world, std::span<const double>(varied), counts));
  const std::vector<float> varied_f(static_cast<std::size_t>(w % 3), w * 0.1F);
  record(out, comm.all_gather_v(world, std::span<const float>(varied_f), counts));

  // Shards of 0, 1, 2, 0, ... values (counts) on the world, of 2, 1, 0, ... on the evens.
  const std::vector<double> scatter_d =
      order_sensitive<double>(w, 3 * static_cast<std::size_t>(size));
  std::int64_t total = 0;
  for (const std::int64_t n : counts) total += n;
  record(out, comm.reduce_scatter_v(
                  world, std::span<const double>(scatter_d).first(static_cast<std::size_t>(total)),
                  counts));
  std::vector<std::int64_t> even_counts;
  for (std::int32_t i = 0; i < evens.size(); ++i) even_counts.push_back((2 - i % 3 + 3) % 3);
  std::int64_t even_total = 0;
  for (const std::int64_t n : even_counts) even_total += n;
  const std::vector<float> scatter_f =
      order_sensitive<float>(w, static_cast<std::size_t>(even_total));
  record(out, comm.reduce_scatter_v(evens, std::span<const float>(scatter_f), even_counts));

  const std::string text(static_cast<std::size_t>(w * 3 + 1), static_cast<char>('a' + w));
  for (const auto& object :
       comm.all_gather_object(evens, std::as_bytes(std::span(text.data(), text.size())))) {
    record(out, object);
  }
  record(out, comm.all_gather_object(world, {}).front());

  for (const ReduceOp op : {ReduceOp::sum, ReduceOp::mean}) {
    std::vector<double> d = order_sensitive<double>(w, 5);
    comm.all_reduce(world, std::span(d), op);
    record(out, d);
    std::vector<float> f = order_sensitive<float>(w, 5);
    comm.all_reduce(evens, std::span(f), op);
    record(out, f);
  }
  if (!halves.world_ranks.empty()) {
    std::vector<double> d = order_sensitive<double>(w, 3);
    comm.all_reduce(halves, std::span(d), ReduceOp::sum);
    record(out, d);
  }

  // Groups never made by split (MPI_Comm_create_group).
  if (size % 2 == 0) {
    const infonce::sim::MeshLayout mesh(size, size / 2);
    const Group dp = mesh.dp_group(w);
    std::vector<double> d = order_sensitive<double>(w, 4);
    comm.all_reduce(dp, std::span(d), ReduceOp::sum);
    record(out, d);
    const Group replicas = mesh.replica_group(w);
    record(out, comm.all_gather(replicas, std::span<const double>(mine)));
  }

  std::vector<double> root_values{w * 2.0, w * 3.0};
  comm.broadcast(world, std::span(root_values), size - 1);
  record(out, root_values);
  std::vector<std::byte> root_bytes(3, static_cast<std::byte>(w));
  comm.broadcast(evens, std::span(root_bytes), 0);
  record(out, root_bytes);
  comm.barrier(world);
  comm.barrier(evens);
  return out;
}

int conformance(infonce::sim::MpiCommunicator& comm) {
  const std::vector<std::byte> mine = conformance_program(comm);
  const auto on_mpi = comm.all_gather_object(comm.world(), mine);
  if (comm.world_rank() != 0) return 0;
  std::vector<std::vector<std::byte>> on_fibers(static_cast<std::size_t>(comm.world_size()));
  infonce::sim::SimulationOptions options;
  options.world_size = comm.world_size();
  infonce::sim::run_fibers(options, [&](Communicator& fiber) {
    on_fibers[static_cast<std::size_t>(fiber.world_rank())] = conformance_program(fiber);
  });
  std::int32_t differing = 0;
  for (std::size_t w = 0; w < on_mpi.size(); ++w) {
    if (!std::ranges::equal(on_mpi[w], on_fibers[w])) {
      ++differing;
      std::cout << "world rank " << w << ": MPI and fiber results differ\n";
    }
  }
  std::cout << "conformance: " << on_mpi.size() - static_cast<std::size_t>(differing) << "/"
            << on_mpi.size() << " ranks produce the same bytes on MPI and on fibers ("
            << on_mpi[0].size() << " bytes each on rank 0)\n";
  return differing == 0 ? 0 : 1;
}

int misbehave(infonce::sim::MpiCommunicator& comm, const std::string& mode) {
  const Group world = comm.world();
  const std::int32_t w = comm.world_rank();
  const bool culprit = w == 1;
  std::vector<double> values{1.0, 2.0};
  if (mode == "throw") {
    if (culprit) throw infonce::InputError("injected fault: world rank 1 rejects its input");
    comm.all_gather(world, std::span<const double>(values));
  } else if (mode == "wrong-size") {
    if (culprit) values.push_back(3.0);
    comm.all_gather(world, std::span<const double>(values));
  } else if (mode == "wrong-collective") {
    if (culprit) {
      comm.barrier(world);
    } else {
      comm.all_reduce(world, std::span(values), ReduceOp::sum);
    }
  } else if (mode == "counts-mismatch") {
    std::vector<std::int64_t> counts(static_cast<std::size_t>(comm.world_size()), 2);
    if (culprit) values.pop_back();
    comm.all_gather_v(world, std::span<const double>(values), counts);
  } else if (mode == "counts-differ") {
    std::vector<std::int64_t> counts(static_cast<std::size_t>(comm.world_size()), 2);
    if (culprit) counts[0] = 3;
    comm.all_gather_v(world, std::span<const double>(values), counts);
  } else if (mode == "scatter-size" || mode == "scatter-counts-differ") {
    std::vector<std::int64_t> counts(static_cast<std::size_t>(comm.world_size()), 2);
    std::vector<double> full(2 * counts.size(), 1.0);
    if (culprit && mode == "scatter-size") full.pop_back();
    if (culprit && mode == "scatter-counts-differ") {
      counts[0] = 3;
      counts.back() = 1;
    }
    comm.reduce_scatter_v(world, std::span<const double>(full), counts);
  } else if (mode == "bad-root") {
    comm.broadcast(world, std::span(values), comm.world_size());
  } else if (mode == "not-member") {
    const Group others{7, {0}};
    comm.all_gather(others, std::span<const double>(values));
  } else if (mode == "early-return" || mode == "exit-early") {
    if (culprit) return 0;
    comm.all_gather(world, std::span<const double>(values));
  } else if (mode == "wrong-group") {
    const Group reversed{9, {1, 0}};
    comm.all_gather(culprit ? reversed : world, std::span<const double>(values));
  } else if (mode == "message-size" || mode == "message-type") {
    // Rank 0 sends two values to rank 1, which expects three (or floats).
    if (w == 0) comm.send(world, 1, std::span<const double>(values));
    if (w == 1 && mode == "message-size") {
      std::vector<double> out(3);
      comm.recv(world, 0, std::span<double>(out));
    }
    if (w == 1 && mode == "message-type") {
      std::vector<float> out(2);
      comm.recv(world, 0, std::span<float>(out));
    }
  } else if (mode == "missing-send") {
    // Rank 2 waits for a message rank 1 never sends (stall timeout 2 s).
    if (w == 2) comm.recv(world, 1, std::span<double>(values));
  } else if (mode == "unreceived") {
    if (w == 2) comm.send(world, 0, std::span<const double>(values));
    comm.check_messages_delivered();
  } else if (mode == "message-peer") {
    comm.send(world, w, std::span<const double>(values));
  } else {
    throw std::invalid_argument("unknown mode '" + mode + "'");
  }
  std::cout << "world rank " << w << " finished mode " << mode << " without an error\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  infonce::sim::ensure_mpi_initialized();
  const std::string mode = argc == 2 ? argv[1] : "";
  return infonce::sim::run_or_abort_job(
      [&] {
        infonce::sim::MpiOptions options;
        options.stall_timeout_seconds =
            mode == "wrong-group" || mode == "exit-early" || mode == "missing-send" ? 2 : 60;
        infonce::sim::MpiCommunicator comm(options);
        if (mode == "conformance") {
          // Every rank exits with world rank 0's verdict.
          double code = conformance(comm);
          comm.broadcast(comm.world(), std::span(&code, 1), 0);
          return static_cast<int>(code);
        }
        const int code = misbehave(comm, mode);
        // Programs end with a collective that all ranks call (as the CLI's
        // exit-code broadcast): a rank that skipped something meets it here.
        if (!(mode == "exit-early" && comm.world_rank() == 1)) comm.barrier(comm.world());
        return code;
      },
      "mpi_probe", infonce::mpi_test::job_exit_code);
}
