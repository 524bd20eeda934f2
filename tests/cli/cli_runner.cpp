#include "tests/cli/cli_runner.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

extern char** environ;

namespace infonce::cli_test {
namespace fs = std::filesystem;
namespace {

std::string read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Output goes to files, not pipes: nothing can block however much is written.
fs::path capture_dir() {
  static const fs::path dir = fresh_work_dir("capture");
  return dir;
}

}  // namespace

fs::path source_dir() {
  return INFONCE_SOURCE_DIR;
}

fs::path fresh_work_dir(std::string_view test_name) {
  // Per process: ctest runs many test_cli processes at once, and each builds
  // its parameter tables (with their files) at start-up.
  const fs::path dir = fs::path(INFONCE_CLI_WORK_DIR) / std::to_string(::getpid()) / test_name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

fs::path write_text_file(const fs::path& path, std::string_view text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (!out) throw std::runtime_error("cannot write " + path.string());
  return path;
}

CliResult run_infonce_sim(const std::vector<std::string>& args) {
  static int call = 0;
  ++call;
  const fs::path out_path = capture_dir() / ("out-" + std::to_string(call));
  const fs::path err_path = capture_dir() / ("err-" + std::to_string(call));

  std::vector<std::string> argv_storage{INFONCE_SIM_BINARY};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& arg : argv_storage) argv.push_back(arg.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) {
    throw std::runtime_error(std::string("posix_spawn: ") + std::strerror(spawned));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw std::runtime_error(std::string("waitpid: ") + std::strerror(errno));
  }
  CliResult result;
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  result.out = read_all(out_path);
  result.err = read_all(err_path);
  fs::remove(out_path);
  fs::remove(err_path);
  return result;
}

std::vector<std::string> lines_of(std::string_view text) {
  std::vector<std::string> lines;
  while (!text.empty()) {
    const std::size_t end = text.find('\n');
    lines.emplace_back(text.substr(0, end));
    text = end == text.npos ? std::string_view{} : text.substr(end + 1);
  }
  return lines;
}

}  // namespace infonce::cli_test
