// infonce-sim: every command lives in its own cli/<command>.cpp and registers
// itself (cli/command.hpp); this file only hands over the arguments.
#include <iostream>
#include <string>
#include <vector>

#include "cli/command.hpp"

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  // argv[0] as given names the program in the reproduce commands it prints.
  const std::string program = argc > 0 && argv[0] != nullptr ? argv[0] : "";
  return infonce::cli::run_cli(args, std::cout, std::cerr, program);
}
