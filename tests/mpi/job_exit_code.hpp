// The exit code an MPI test program's job ends with when a rank throws (the
// CLI's convention: 2 bad input, 3 simulation error, 4 anything else).
#pragma once

#include <exception>

#include "base/error.hpp"

namespace infonce::mpi_test {

inline int job_exit_code(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const InputError&) {
    return 2;
  } catch (const SimulationError&) {
    return 3;
  } catch (...) {
    return 4;
  }
}

}  // namespace infonce::mpi_test
