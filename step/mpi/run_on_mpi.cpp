#include "step/mpi/run_on_mpi.hpp"

#include <cstring>
#include <string>
#include <vector>

#include "base/assert.hpp"
#include "base/error.hpp"
#include "step/rank_program.hpp"

namespace infonce::step {
namespace {

// One rank's output on the wire: loss, padded_positives, then the gradient,
// all as doubles (padded_positives is a count far below 2^53).
template <class Scalar>
std::vector<std::byte> to_bytes(const RankOutput<Scalar>& out) {
  std::vector<double> words;
  words.reserve(out.grad.size() + 2);
  words.push_back(static_cast<double>(out.reported_loss));
  words.push_back(static_cast<double>(out.padded_positives));
  for (const Scalar g : out.grad) words.push_back(static_cast<double>(g));
  std::vector<std::byte> bytes(words.size() * sizeof(double));
  std::memcpy(bytes.data(), words.data(), bytes.size());
  return bytes;
}

void add_rank(DistributedResult& result, std::span<const std::byte> bytes) {
  INFONCE_ASSERT(bytes.size() % sizeof(double) == 0 && bytes.size() >= 2 * sizeof(double));
  std::vector<double> words(bytes.size() / sizeof(double));
  std::memcpy(words.data(), bytes.data(), bytes.size());
  result.losses.push_back(words[0]);
  result.padded_positives += static_cast<std::int64_t>(words[1]);
  result.grads.emplace_back(words.begin() + 2, words.end());
}

template <class Scalar>
DistributedResult run_in(const Case& c, const StepVariant& variant, sim::Communicator& comm) {
  const RankOutput<Scalar> mine = run_rank_program<Scalar>(comm, c, variant);
  DistributedResult result;
  for (const auto& bytes : comm.all_gather_object(comm.world(), to_bytes(mine))) {
    add_rank(result, bytes);
  }
  return result;
}

}  // namespace

void check_world_matches(const Case& c, const sim::Communicator& comm) {
  if (comm.world_size() != c.mesh.world) {
    throw InputError("mesh.world: the case has " + std::to_string(c.mesh.world) +
                     (c.mesh.world == 1 ? " world rank" : " world ranks") +
                     " but the MPI job has " + std::to_string(comm.world_size()) +
                     (comm.world_size() == 1 ? " process" : " processes") +
                     " (run it with mpirun -np " + std::to_string(c.mesh.world) + ")");
  }
}

DistributedResult run_on_mpi(const Case& c, const StepVariant& variant, sim::Communicator& comm) {
  check_world_matches(c, comm);
  return c.scalar == ScalarType::float64 ? run_in<double>(c, variant, comm)
                                         : run_in<float>(c, variant, comm);
}

std::optional<CaseReport> run_case_on_mpi(const Case& c, const Mutant* mutant,
                                          sim::Communicator& comm) {
  check_world_matches(c, comm);
  const bool reporter = comm.world_rank() == 0;
  std::optional<ReferenceValues> reference;
  if (reporter) reference = compute_case_reference(c);
  const DistributedSetup setup = distributed_setup(c, mutant);
  const DistributedResult distributed = run_on_mpi(setup.distributed_case(), setup.variant, comm);
  if (!reporter) return std::nullopt;
  return evaluate(c, distributed, *reference);
}

}  // namespace infonce::step
