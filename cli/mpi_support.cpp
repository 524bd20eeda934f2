#include "cli/mpi_support.hpp"

#include <cstring>
#include <new>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "base/error.hpp"

#if INFONCE_HAVE_MPI
#include "sim/mpi/mpi_runtime.hpp"
#endif

namespace infonce::cli {

int exit_code_of(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const UsageError&) {
    return kExitBadInput;
  } catch (const InputError&) {
    return kExitBadInput;
  } catch (const SimulationError&) {
    return kExitSimulationError;
  } catch (...) {
    return kExitInternalError;
  }
}

#if INFONCE_HAVE_MPI
namespace {

std::string what_of(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::bad_alloc&) {
    return "out of memory";
  } catch (const UsageError& e) {
    return e.what();
  } catch (const InputError& e) {
    return e.what();
  } catch (const SimulationError& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("internal error: ") + e.what();
  } catch (...) {
    return "internal error: unknown exception";
  }
}

std::string one_line(std::string text) {
  for (char& ch : text) {
    if (ch == '\n' || ch == '\r' || ch == '\t') ch = ' ';
  }
  return text;
}

struct SetupFailure {
  std::int32_t rank = 0;
  int exit_code = 0;
  std::string message;
};

// Runs `setup` here and tells every rank the lowest failing rank's error.
std::optional<SetupFailure> agree_on_setup(sim::MpiCommunicator& comm, const MpiSetup& setup) {
  std::vector<std::byte> mine;  // empty: success; else exit code byte + message
  try {
    setup(comm);
  } catch (...) {
    const std::exception_ptr error = std::current_exception();
    const std::string message = what_of(error);
    mine.resize(1 + message.size());
    mine[0] = static_cast<std::byte>(exit_code_of(error));
    std::memcpy(mine.data() + 1, message.data(), message.size());
  }
  const auto all = comm.all_gather_object(comm.world(), mine);
  for (std::size_t rank = 0; rank < all.size(); ++rank) {
    if (all[rank].empty()) continue;
    return SetupFailure{
        static_cast<std::int32_t>(rank), static_cast<int>(all[rank][0]),
        std::string(reinterpret_cast<const char*>(all[rank].data()) + 1, all[rank].size() - 1)};
  }
  return std::nullopt;
}

}  // namespace

int run_mpi_job(const CommandContext& context, const sim::MpiOptions& options,
                const MpiSetup& setup, const MpiBody& body) {
  sim::ensure_mpi_initialized();
  const std::string name(context.command.name);
  return sim::run_or_abort_job(
      [&]() -> int {
        sim::MpiCommunicator comm(options);
        const bool reporter = comm.world_rank() == 0;
        if (const auto failure = agree_on_setup(comm, setup)) {
          if (reporter) {
            const std::string where =
                failure->rank == 0 ? "" : "world rank " + std::to_string(failure->rank) + ": ";
            context.err << std::string(kProgram) + ": error: " + where +
                               one_line(failure->message) + "\n";
          }
          return failure->exit_code;
        }
        std::ostream discard(nullptr);
        double code = body(comm, reporter ? context.out : discard);
        context.out.flush();
        comm.broadcast(comm.world(), std::span(&code, 1), 0);
        return static_cast<int>(code);
      },
      kProgram, exit_code_of,
      [](const std::exception_ptr& error) {
        // Ranks fail on their own here: say which one.
        return "world rank " + std::to_string(sim::mpi_world_rank()) + ": " + what_of(error);
      });
}

#endif

}  // namespace infonce::cli
