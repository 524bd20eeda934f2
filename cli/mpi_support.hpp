// Running a command's work as an MPI job (`mpirun -np W infonce-sim ...
// --backend mpi`): one process per world rank, world rank 0 the only one that
// prints, every process ending with the same exit code, and no rank ever left
// hanging when another fails.
#pragma once

#include <exception>
#include <functional>
#include <iosfwd>

#include "cli/command.hpp"

#if INFONCE_HAVE_MPI
#include "sim/mpi/mpi_communicator.hpp"
#endif

namespace infonce::cli {

// The exit code run_cli gives the exception (UsageError and InputError 2,
// SimulationError 3, anything else 4).
int exit_code_of(const std::exception_ptr& error);

#if INFONCE_HAVE_MPI

// `setup` (which must not communicate) runs on every rank; if it throws on
// any rank, world rank 0 prints the lowest failing rank's error and every rank
// returns that error's exit code: every rank knows, so no abort is needed.
// Then `body` runs with `out` = context.out on world rank 0 and a stream that
// discards everything on the others. If `body` throws on any rank, that rank
// prints the error and aborts the whole job (sim::run_or_abort_job). The exit
// code of world rank 0's body is every rank's.
using MpiSetup = std::function<void(sim::MpiCommunicator& comm)>;
using MpiBody = std::function<int(sim::MpiCommunicator& comm, std::ostream& out)>;
int run_mpi_job(const CommandContext& context, const sim::MpiOptions& options,
                const MpiSetup& setup, const MpiBody& body);

#endif

}  // namespace infonce::cli
