// The command registry of `infonce-sim <command> [options]`.
//
// Adding a command = adding one file cli/<command>.cpp that defines
//
//   int run_mine(const CommandContext& context) { ... }
//   const RegisterCommand kMine{{"mine", "--case FILE", "one-line summary", run_mine}};
//
// (in an anonymous namespace). cli/*.cpp are linked straight into the
// executable, not through a static library, so every registrar runs before
// main. A name may have two words ("corpus replay"): the longest registered
// name that the arguments start with wins.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <boost/program_options.hpp>

namespace infonce::cli {

// Exit codes of every command.
inline constexpr int kExitOk = 0;
inline constexpr int kExitCheckFailed = 1;      // the command ran, a check it made failed
inline constexpr int kExitBadInput = 2;         // usage error, unreadable or invalid input
inline constexpr int kExitSimulationError = 3;  // collective misuse / hang (SimulationError)
inline constexpr int kExitInternalError = 4;    // a bug in infonce-sim, or out of memory
inline constexpr int kExitInterrupted = 130;    // check stopped by Ctrl-C (128 + SIGINT)

// What `--help` and the man page say about the codes above.
struct ExitCodeDoc {
  int code;
  std::string_view meaning;
};
inline constexpr std::array<ExitCodeDoc, 6> kExitCodeDocs = {{
    {kExitOk, "ok"},
    {kExitCheckFailed, "a check failed"},
    {kExitBadInput, "bad input or usage"},
    {kExitSimulationError, "simulation error"},
    {kExitInternalError, "internal error (a bug, or out of memory)"},
    {kExitInterrupted, "check interrupted (Ctrl-C; the report is still printed)"},
}};

inline constexpr std::string_view kProgram = "infonce-sim";
inline constexpr std::string_view kProgramSummary =
    "Deterministic simulation and property tests of data-parallel InfoNCE.";

// Misuse of the command line (unknown option, missing option): exit 2.
class UsageError : public std::runtime_error {
 public:
  explicit UsageError(const std::string& message) : std::runtime_error(message) {}
};

struct Command;

// Receives a command's option table instead of printing its --help (the man
// page and the completion are generated from the tables --help prints).
using OptionsSink = std::function<void(const boost::program_options::options_description&)>;

struct CommandContext {
  const Command& command;
  std::span<const std::string> args;  // after the command's name
  std::ostream& out;
  std::ostream& err;
  // How the program was invoked (argv[0] as given, e.g. build/infonce-sim):
  // the commands a report prints to reproduce a failure start with it, so
  // they run as printed from the same directory.
  std::string_view program = kProgram;
  // Set: --help hands the option table here instead of printing it.
  const OptionsSink* describe = nullptr;
};

using CommandFunction = int (*)(const CommandContext& context);

struct Command {
  std::string_view name;     // "reference", or two words: "corpus replay"
  std::string_view usage;    // options synopsis: "--case FILE [--json]"
  std::string_view summary;  // one line, for `infonce-sim --help`
  CommandFunction run;
};

// Every registered command, sorted by name.
const std::vector<Command>& registered_commands();

struct RegisterCommand {
  explicit RegisterCommand(const Command& command);
};

// The command `args` names and how many words its name took; nullopt if none.
struct CommandMatch {
  const Command* command;
  std::size_t words;
};
std::optional<CommandMatch> match_command(std::span<const std::string> args);

// Parses the command's options (adding --help). Returns nullopt when --help
// was given: the help has been printed to context.out and the command should
// return kExitOk. Throws UsageError naming the option on any misuse.
std::optional<boost::program_options::variables_map> parse_command_options(
    const CommandContext& context, boost::program_options::options_description options);

// Like parse_command_options, plus positional words collected into
// `positional_name` (a vector<string> option, at most `max_count`; -1: any).
std::optional<boost::program_options::variables_map> parse_options_and_words(
    const CommandContext& context, boost::program_options::options_description options,
    const std::string& positional_name, int max_count);

// Throws UsageError "<command>: missing --<option> <VALUE>" if it was not given.
void require_option(const CommandContext& context,
                    const boost::program_options::variables_map& values, std::string_view option,
                    std::string_view value_name);

// The whole program: dispatch, --help, --version, errors -> exit codes.
// `program` is argv[0] as given (see CommandContext::program).
int run_cli(std::span<const std::string> args, std::ostream& out, std::ostream& err,
            std::string_view program = kProgram);

}  // namespace infonce::cli
