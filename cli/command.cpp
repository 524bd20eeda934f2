#include "cli/command.hpp"

#include <algorithm>
#include <exception>
#include <new>
#include <ostream>
#include <sstream>

#include "base/assert.hpp"
#include "base/error.hpp"
#include "cli/manual.hpp"
#include "infonce_version.hpp"  // generated: project version, git commit

namespace infonce::cli {
namespace po = boost::program_options;
namespace {

// Function-local, so registration from other files' static initialisers
// never sees it unconstructed.
std::vector<Command>& registry() {
  static std::vector<Command> commands;
  return commands;
}

std::vector<std::string_view> words_of(std::string_view name) {
  std::vector<std::string_view> words;
  while (!name.empty()) {
    const std::size_t space = name.find(' ');
    words.push_back(name.substr(0, space));
    name = space == name.npos ? std::string_view{} : name.substr(space + 1);
  }
  return words;
}

// Messages go out on one line whatever a file name or an exception holds.
std::string one_line(std::string_view text) {
  std::string line(text);
  for (char& ch : line) {
    if (ch == '\n' || ch == '\r' || ch == '\t') ch = ' ';
  }
  return line;
}

void print_error(std::ostream& err, std::string_view message) {
  err << kProgram << ": error: " << one_line(message) << '\n';
}

void print_program_help(std::ostream& out) {
  out << "usage: " << kProgram << " <command> [options]\n"
      << "       " << kProgram << " <command> --help\n"
      << "       " << kProgram << " --version\n\n"
      << kProgramSummary << "\n\ncommands:\n";
  std::size_t width = 0;
  for (const Command& command : registered_commands()) width = std::max(width, command.name.size());
  for (const Command& command : registered_commands()) {
    out << "  " << command.name << std::string(width - command.name.size() + 2, ' ')
        << command.summary << '\n';
  }
  out << "\nexit codes:";
  for (const ExitCodeDoc& exit : kExitCodeDocs) {
    out << (exit.code == kExitOk ? " " : ", ") << exit.code << ' ' << exit.meaning;
  }
  out << "\n";
}

// `help` and `help <command>`.
int run_help(std::span<const std::string> args, std::ostream& out) {
  if (args.empty()) {
    print_program_help(out);
    return kExitOk;
  }
  const auto match = match_command(args);
  if (!match || match->words != args.size()) {
    throw UsageError("help: unknown command '" + one_line(args[0]) + "'");
  }
  const std::string help_flag = "--help";
  std::ostringstream ignored;
  const CommandContext context{*match->command, std::span(&help_flag, 1), out, ignored};
  return match->command->run(context);
}

std::string unknown_command_message(std::string_view word) {
  std::string message = "unknown command '" + one_line(word) + "'";
  for (const Command& command : registered_commands()) {
    const auto words = words_of(command.name);
    if (words.size() > 1 && words[0] == word) {
      return message + " (did you mean '" + std::string(command.name) + "'?)";
    }
  }
  return message + " (see " + std::string(kProgram) + " --help)";
}

int dispatch(std::span<const std::string> args, std::ostream& out, std::ostream& err,
             std::string_view program) {
  if (args.empty()) {
    throw UsageError("no command given (see " + std::string(kProgram) + " --help)");
  }
  const std::string& first = args[0];
  if (first == "--help" || first == "-h") {
    print_program_help(out);
    return kExitOk;
  }
  if (first == "--version") {
    if (args.size() > 1) throw UsageError("--version takes no argument");
    out << kProgram << ' ' << build_info::kVersion;
    if (!build_info::kGitCommit.empty()) out << " (git " << build_info::kGitCommit << ')';
    out << '\n';
    return kExitOk;
  }
  if (first == "help") return run_help(args.subspan(1), out);
  // Hidden: the build generates the man page and the completion with these.
  if (first == "help-man") return run_help_man(args.subspan(1), out);
  if (first == "help-completion") return run_help_completion(args.subspan(1), out);
  if (first.starts_with('-')) {
    throw UsageError("unknown option '" + one_line(first) + "' (a command comes first; see " +
                     std::string(kProgram) + " --help)");
  }
  const auto match = match_command(args);
  if (!match) throw UsageError(unknown_command_message(first));
  const CommandContext context{*match->command, args.subspan(match->words), out, err, program};
  return match->command->run(context);
}

}  // namespace

const std::vector<Command>& registered_commands() {
  return registry();
}

RegisterCommand::RegisterCommand(const Command& command) {
  INFONCE_ASSERT(!command.name.empty() && command.run != nullptr);
  std::vector<Command>& commands = registry();
  const auto position =
      std::lower_bound(commands.begin(), commands.end(), command,
                       [](const Command& a, const Command& b) { return a.name < b.name; });
  INFONCE_ASSERT(position == commands.end() || position->name != command.name);
  commands.insert(position, command);
}

std::optional<CommandMatch> match_command(std::span<const std::string> args) {
  std::optional<CommandMatch> best;
  for (const Command& command : registered_commands()) {
    const auto words = words_of(command.name);
    if (words.size() > args.size()) continue;
    if (!std::equal(words.begin(), words.end(), args.begin())) continue;
    if (!best || words.size() > best->words) best = CommandMatch{&command, words.size()};
  }
  return best;
}

std::optional<po::variables_map> parse_options_and_words(const CommandContext& context,
                                                         po::options_description options,
                                                         const std::string& positional_name,
                                                         int max_count) {
  options.add_options()("help,h", "show this help");
  po::options_description all;
  all.add(options);
  // An empty positional description makes any stray word an error.
  po::positional_options_description positional;
  if (!positional_name.empty()) {
    po::options_description hidden;
    hidden.add_options()(positional_name.c_str(), po::value<std::vector<std::string>>());
    all.add(hidden);
    positional.add(positional_name.c_str(), max_count);
  }
  const std::string name(context.command.name);
  po::variables_map values;
  try {
    // No abbreviated options: `--ca` must not silently mean `--case`.
    const int style =
        po::command_line_style::default_style & ~po::command_line_style::allow_guessing;
    const std::vector<std::string> args(context.args.begin(), context.args.end());
    po::store(po::command_line_parser(args).options(all).positional(positional).style(style).run(),
              values);
    po::notify(values);
  } catch (const po::error& error) {
    throw UsageError(name + ": " + error.what() + " (see " + std::string(kProgram) + " " + name +
                     " --help)");
  }
  if (values.count("help") != 0 && context.describe != nullptr) {
    (*context.describe)(options);
    return std::nullopt;
  }
  if (values.count("help") != 0) {
    context.out << "usage: " << kProgram << ' ' << name << ' ' << context.command.usage << "\n\n"
                << context.command.summary << "\n\n"
                << options;
    return std::nullopt;
  }
  return values;
}

std::optional<po::variables_map> parse_command_options(const CommandContext& context,
                                                       po::options_description options) {
  return parse_options_and_words(context, std::move(options), "", 0);
}

void require_option(const CommandContext& context, const po::variables_map& values,
                    std::string_view option, std::string_view value_name) {
  if (values.count(std::string(option)) == 0) {
    throw UsageError(std::string(context.command.name) + ": missing --" + std::string(option) +
                     " " + std::string(value_name));
  }
}

int run_cli(std::span<const std::string> args, std::ostream& out, std::ostream& err,
            std::string_view program) {
  try {
    return dispatch(args, out, err, program.empty() ? kProgram : program);
  } catch (const UsageError& error) {
    print_error(err, error.what());
    return kExitBadInput;
  } catch (const InputError& error) {
    print_error(err, error.what());
    return kExitBadInput;
  } catch (const SimulationError& error) {
    print_error(err, error.what());
    return kExitSimulationError;
  } catch (const std::bad_alloc&) {
    print_error(err, "out of memory");
    return kExitInternalError;
  } catch (const std::exception& error) {
    print_error(err, std::string("internal error: ") + error.what());
    return kExitInternalError;
  } catch (...) {
    print_error(err, "internal error: unknown exception");
    return kExitInternalError;
  }
}

}  // namespace infonce::cli
