// The man page and the bash completion of infonce-sim, generated from the
// option tables that `<command> --help` prints, so the three never disagree.
// Hidden commands (not listed by --help; the build runs them):
//   infonce-sim help-man [FILE]          roff, one section per command
//   infonce-sim help-completion [FILE]   a bash completion script
#pragma once

#include <iosfwd>
#include <span>
#include <string>

namespace infonce::cli {

void write_man_page(std::ostream& out);
void write_bash_completion(std::ostream& out);

// `help-man` / `help-completion` with their arguments (at most one FILE:
// written instead of standard output). Returns the exit code.
int run_help_man(std::span<const std::string> args, std::ostream& out);
int run_help_completion(std::span<const std::string> args, std::ostream& out);

}  // namespace infonce::cli
