// Error kinds shared by every layer. Each maps to one CLI exit code.
#pragma once

#include <stdexcept>
#include <string>

namespace infonce {

// Bad input from a user: a case file, a CLI option, a configuration the
// trainer itself would reject. The CLI prints what() on one line, exits 2.
class InputError : public std::runtime_error {
 public:
  explicit InputError(const std::string& message) : std::runtime_error(message) {}
};

// A collective misuse or a hang detected by the simulator (or the MPI
// backend). The message names the collective sequence number, kind, group and
// the ranks involved.
class SimulationError : public std::runtime_error {
 public:
  explicit SimulationError(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace infonce
