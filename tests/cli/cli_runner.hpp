// Runs the infonce-sim binary as a child process and captures what it says.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace infonce::cli_test {

struct CliResult {
  int exit_code = -1;  // the process's exit status; -1 if it died of a signal
  int signal = 0;      // the signal that killed it, if any
  std::string out;     // standard output
  std::string err;     // standard error
};

CliResult run_infonce_sim(const std::vector<std::string>& args);

// A fresh, empty directory for one test's files (under the build tree).
std::filesystem::path fresh_work_dir(std::string_view test_name);

std::filesystem::path write_text_file(const std::filesystem::path& path, std::string_view text);

std::filesystem::path source_dir();

// Lines of `text`, each without its '\n'; a final line without '\n' counts.
std::vector<std::string> lines_of(std::string_view text);

}  // namespace infonce::cli_test
