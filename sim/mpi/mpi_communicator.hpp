// The Communicator over MPI: one process per world rank, MPI_COMM_WORLD as the
// world. Semantics are those of the fiber simulator (sim/fiber_simulation.hpp),
// so the same rank program gives the same bits on both backends:
// - groups are (id, ordered members); split() numbers its groups 1, 2, ... in
//   order of split calls and ascending colors, members ordered by (key, world
//   rank), exactly as the simulator does; any other group (e.g. from
//   MeshLayout) gets its communicator from MPI_Comm_create_group on first use.
//   Communicators are cached per group.
// - all_reduce (default MpiReduction::ordered) all-gathers every member's
//   values and sums them in group-rank order, left to right, in the element
//   type, then divides by the member count for mean: bit-identical with the
//   simulator's default order. MpiReduction::native uses MPI_Allreduce, whose
//   summation order MPI leaves unspecified: results then agree with the
//   simulator within the SPEC's tolerance, not bit for bit.
// - reduce_scatter_v likewise: ordered (default) sends shard k of every member
//   to member k (MPI_Alltoallv) and sums the parts there in group-rank order;
//   native uses MPI_Reduce_scatter.
// - Every collective first all-gathers each member's call (kind, element
//   type, count, op, root, all_gather_v counts): members calling different
//   collectives or sizes get the same SimulationError on every member, named
//   like the simulator's ("collective #3 on group 1 {0,2}: ..."), instead of
//   MPI's undefined behaviour. MPI errors (MPI_ERRORS_RETURN) become
//   SimulationError too.
// - What MPI cannot see: a member that never arrives (returned, or called on
//   another group) leaves the others waiting. With stall_timeout_seconds > 0
//   the call exchange polls and throws SimulationError after that long; the
//   only clock in the harness, and it never reaches a result.
// - send/recv (SPEC 16) travel on their own duplicate of the world with a
//   header (group, element type, count, the sender's call number): a message
//   of another group, type or size is a SimulationError naming both calls, as
//   in the simulator; a recv waits under stall_timeout_seconds like a
//   collective (MPI cannot see that no send will come).
// A rank that throws must end the job (run_or_abort_job in mpi_runtime.hpp).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "sim/communicator.hpp"

namespace infonce::sim {

enum class MpiReduction {
  ordered,  // gather, then sum in group-rank order: bit-identical with the fiber simulator
  native,   // MPI_Allreduce: within tolerance of the simulator, order unspecified
};

struct MpiOptions {
  MpiReduction reduction = MpiReduction::ordered;
  // > 0: a collective whose members have not all arrived after this many
  // seconds is a SimulationError. 0: wait as long as MPI does (forever).
  double stall_timeout_seconds = 0;
};

class MpiCommunicator final : public Communicator {
 public:
  // Collective over MPI_COMM_WORLD (it is duplicated, so the harness's traffic
  // never matches anyone else's). Calls ensure_mpi_initialized().
  explicit MpiCommunicator(const MpiOptions& options = {});
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  const MpiOptions& options() const;
  // Collectives this rank has called (splits included).
  std::int64_t calls() const;

  std::int32_t world_rank() const override;
  std::int32_t world_size() const override;
  Group world() const override;
  Group split(std::int32_t color, std::int32_t key) override;

  std::vector<double> all_gather(const Group& group, std::span<const double> mine) override;
  std::vector<float> all_gather(const Group& group, std::span<const float> mine) override;
  std::vector<std::int64_t> all_gather(const Group& group,
                                       std::span<const std::int64_t> mine) override;

  std::vector<double> all_gather_v(const Group& group, std::span<const double> mine,
                                   std::span<const std::int64_t> counts) override;
  std::vector<float> all_gather_v(const Group& group, std::span<const float> mine,
                                  std::span<const std::int64_t> counts) override;
  std::vector<std::int64_t> all_gather_v(const Group& group, std::span<const std::int64_t> mine,
                                         std::span<const std::int64_t> counts) override;

  GatheredObjects all_gather_object(const Group& group, std::span<const std::byte> mine) override;

  std::vector<double> reduce_scatter_v(const Group& group, std::span<const double> values,
                                       std::span<const std::int64_t> counts) override;
  std::vector<float> reduce_scatter_v(const Group& group, std::span<const float> values,
                                      std::span<const std::int64_t> counts) override;

  void all_reduce(const Group& group, std::span<double> values, ReduceOp op) override;
  void all_reduce(const Group& group, std::span<float> values, ReduceOp op) override;

  void broadcast(const Group& group, std::span<double> values, std::int32_t root) override;
  void broadcast(const Group& group, std::span<std::byte> values, std::int32_t root) override;

  void barrier(const Group& group) override;

  void send(const Group& group, std::int32_t peer, std::span<const double> values) override;
  void send(const Group& group, std::int32_t peer, std::span<const float> values) override;
  void recv(const Group& group, std::int32_t peer, std::span<double> out) override;
  void recv(const Group& group, std::int32_t peer, std::span<float> out) override;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace infonce::sim
