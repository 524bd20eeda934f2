#include "sim/mpi/mpi_runtime.hpp"

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include <mpi.h>

#include "base/assert.hpp"

namespace infonce::sim {
namespace {

// Leaves MPI only together: OpenMPI's mpirun can crash or hang when one
// process sits in MPI_Finalize while another aborts the job, whereas a process
// waiting in a barrier is simply killed by the abort.
void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
}

std::string one_line(std::string text) {
  for (char& ch : text) {
    if (ch == '\n' || ch == '\r' || ch == '\t') ch = ' ';
  }
  return text;
}

std::string what_of(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

}  // namespace

bool mpi_is_initialized() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  return initialized != 0;
}

void ensure_mpi_initialized() {
  if (mpi_is_initialized()) return;
  if (MPI_Init(nullptr, nullptr) != MPI_SUCCESS) {
    std::fprintf(stderr, "infonce-sim: error: MPI_Init failed\n");
    std::exit(4);
  }
  std::atexit(finalize_at_exit);
  // From here on every MPI call's error is a return code we check.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
}

int mpi_world_rank() {
  INFONCE_ASSERT(mpi_is_initialized());
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int mpi_world_size() {
  INFONCE_ASSERT(mpi_is_initialized());
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

void abort_mpi_job(int exit_code) {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);  // MPI_Abort does not return; this is for the type system
}

int run_or_abort_job(const std::function<int()>& body, std::string_view program,
                     const std::function<int(const std::exception_ptr&)>& exit_code_of,
                     const ExceptionText& message_of) {
  std::exception_ptr error;
  try {
    return body();
  } catch (...) {
    error = std::current_exception();
  }
  const std::string message = message_of ? message_of(error) : what_of(error);
  // One write, so lines of ranks failing at once do not interleave.
  const std::string line = std::string(program) + ": error: " + one_line(message) + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
  abort_mpi_job(exit_code_of(error));
}

}  // namespace infonce::sim
