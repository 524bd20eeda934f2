// `infonce-sim mutants`: the known-bug zoo, one line each.
#include <cstdio>
#include <ostream>

#include "cli/command.hpp"
#include "step/mutants.hpp"

namespace infonce::cli {
namespace {

const char* caught_by(step::CaughtBy c) {
  switch (c) {
    case step::CaughtBy::gradient: return "gradient";
    case step::CaughtBy::padding: return "padding";
    case step::CaughtBy::equal_loss: return "equal-loss";
    case step::CaughtBy::crash: return "crash";
  }
  return "?";
}

int run_mutants(const CommandContext& context) {
  const auto values = parse_command_options(context, {"options"});
  if (!values) return kExitOk;
  char line[512];
  for (const step::Mutant& m : step::mutant_registry()) {
    std::snprintf(line, sizeof line, "%-26s %-11s %.*s\n", std::string(m.name).c_str(),
                  caught_by(m.caught_by), static_cast<int>(m.summary.size()), m.summary.data());
    context.out << line;
  }
  return kExitOk;
}

const RegisterCommand kMutants{
    {"mutants", "", "list the known-wrong variants of the step (name, caught by, summary)",
     run_mutants}};

}  // namespace
}  // namespace infonce::cli
