// The MPI process around a rank program: initialising MPI once, and ending the
// whole job when a rank fails (never leaving the other ranks blocked in a
// collective the failed rank will not call).
#pragma once

#include <exception>
#include <functional>
#include <string>
#include <string_view>

namespace infonce::sim {

// MPI_Init on first call (MPI_Finalize then runs at process exit), sets
// MPI_ERRORS_RETURN on MPI_COMM_WORLD. Only the MPI paths call this, so a
// program that never asks for MPI never needs mpirun.
void ensure_mpi_initialized();
bool mpi_is_initialized();

// This process's rank and the job's size in MPI_COMM_WORLD (MPI initialised).
int mpi_world_rank();
int mpi_world_size();

// Flushes stdout and stderr and ends every process of the job with
// `exit_code` (MPI_Abort on MPI_COMM_WORLD).
[[noreturn]] void abort_mpi_job(int exit_code);

// Runs `body` and returns its result. If it throws, prints
// "<program>: error: <message>" as one line on stderr (message_of(the
// exception), or its what() when message_of is empty) and ends the whole job
// with exit_code_of(the exception) via abort_mpi_job: the other ranks may be
// waiting in a collective that this rank will never call, so returning would
// hang the job.
using ExceptionText = std::function<std::string(const std::exception_ptr&)>;
int run_or_abort_job(const std::function<int()>& body, std::string_view program,
                     const std::function<int(const std::exception_ptr&)>& exit_code_of,
                     const ExceptionText& message_of = {});

}  // namespace infonce::sim
