// Running a case's data-parallel step with one process per world rank over
// MPI (`mpirun -np W`), the same rank program as on the fiber simulator.
#pragma once

#include <optional>

#include "casefile/case.hpp"
#include "sim/communicator.hpp"
#include "step/mutants.hpp"
#include "step/run_case.hpp"
#include "step/variant.hpp"

namespace infonce::step {

// Throws InputError naming mesh.world unless the job has exactly the case's
// world size (every rank sees the same sizes, so every rank throws).
void check_world_matches(const Case& c, const sim::Communicator& comm);

// Runs this process's world rank of `c` (step::run_rank_program with `comm`),
// then all-gathers every rank's loss, gradient and padded_positives over the
// world, widened to double exactly as run_on_fibers widens them. Collective:
// every rank calls it and every rank gets the whole result. With an
// MpiCommunicator in its default (ordered) reduction it is bit-identical to
// run_on_fibers under the default options.
DistributedResult run_on_mpi(const Case& c, const StepVariant& variant, sim::Communicator& comm);

// run_case over MPI: the reference (world rank 0 only, computed first, as
// run_case does, so a case the reference rejects gives the same error), the
// distributed run, and the evaluation. The report on world rank 0, nullopt on
// the others. Collective.
std::optional<CaseReport> run_case_on_mpi(const Case& c, const Mutant* mutant,
                                          sim::Communicator& comm);

}  // namespace infonce::step
