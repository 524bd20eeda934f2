// Property checks per second on a directory of case files, in memory, on one
// thread: every *.json case file in DIR is read once (outside the timing),
// then properties::check_case runs on each, in path order, pass after pass.
// A pass is timed with thread CPU time (CLOCK_THREAD_CPUTIME_ID); enough
// passes to last >= 1 s are grouped into a repetition, and the figure is the
// median of 5 repetitions. bench/vs_torch.sh sets it beside the PyTorch DDP
// conformance driver on the same files.
//
// Usage: casefile_check_bench DIR [--min-seconds S]
// Prints "cases N", "checks/s X", "us/case Y", and the property verdicts.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "bench/bench_util.hpp"
#include "casefile/case_json.hpp"
#include "properties/properties.hpp"

namespace {

using namespace infonce;
namespace fs = std::filesystem;

[[noreturn]] void usage_error(const std::string& message) {
  std::fprintf(stderr, "casefile_check_bench: error: %s\n", message.c_str());
  std::exit(2);
}

struct Args {
  fs::path dir;
  double min_seconds = 1.0;
};

Args parse_args(int argc, char** argv) {
  Args args;
  bool have_dir = false;
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word == "--help" || word == "-h") {
      std::printf("usage: casefile_check_bench DIR [--min-seconds S]\n");
      std::exit(0);
    }
    if (word == "--min-seconds") {
      if (i + 1 >= argc) usage_error("--min-seconds needs a value");
      const std::string value = argv[++i];
      char* end = nullptr;
      args.min_seconds = std::strtod(value.c_str(), &end);
      if (value.empty() || *end != '\0' || !std::isfinite(args.min_seconds) ||
          args.min_seconds <= 0) {
        usage_error("--min-seconds must be a number > 0, not '" + value + "'");
      }
    } else if (word.rfind("-", 0) == 0) {
      usage_error("unknown option '" + word + "' (see --help)");
    } else if (have_dir) {
      usage_error("one DIR only, got '" + args.dir.string() + "' and '" + word + "'");
    } else {
      args.dir = word;
      have_dir = true;
    }
  }
  if (!have_dir) usage_error("missing DIR (see --help)");
  if (!fs::is_directory(args.dir)) usage_error(args.dir.string() + ": not a directory");
  return args;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The case files of DIR (top level, *.json with a "format" key), in path order.
std::vector<std::pair<fs::path, Case>> read_cases(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.is_regular_file() && entry.path().extension() == ".json")
      files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  std::vector<std::pair<fs::path, Case>> cases;
  for (const fs::path& file : files) {
    const std::string text = read_text(file);
    const auto json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (json.is_object() && !json.contains("format")) continue;  // e.g. a reference output
    try {
      cases.emplace_back(file, parse_case(text));
    } catch (const InputError& e) {
      usage_error(file.string() + ": " + e.what());
    }
  }
  if (cases.empty()) usage_error(dir.string() + ": no case file found");
  return cases;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse_args(argc, argv);
  const auto cases = read_cases(args.dir);

  // One pass outside the timing: the verdicts (a check that fails here would
  // make the figure meaningless) and a warm stack pool.
  std::int64_t failed = 0, discarded = 0;
  for (const auto& [path, c] : cases) {
    const properties::CaseVerdict verdict = properties::check_case(c, {});
    if (verdict.discarded) {
      ++discarded;
      std::printf("DISCARDED %s: %s\n", path.string().c_str(), verdict.discard_reason.c_str());
    } else if (!verdict.failures.empty()) {
      ++failed;
      std::printf("FAILED %s: %s\n", path.string().c_str(),
                  verdict.failures.front().property.c_str());
    }
  }

  std::int64_t checksum = 0;
  const auto one_pass = [&] {
    for (const auto& [path, c] : cases)
      checksum += static_cast<std::int64_t>(properties::check_case(c, {}).failures.size());
  };
  const bench::Measurement pass =
      bench::measure(one_pass, args.min_seconds, /*single_run_seconds=*/1e30);
  const double n = static_cast<double>(cases.size());
  std::printf("cases %zu (%lld failed, %lld discarded; checksum %lld)\n", cases.size(),
              static_cast<long long>(failed), static_cast<long long>(discarded),
              static_cast<long long>(checksum));
  std::printf("passes per repetition %lld, repetitions %d\n",
              static_cast<long long>(pass.calls_per_repetition), pass.repetitions);
  std::printf("us/case %.2f\n", 1e6 * pass.seconds / n);
  std::printf("checks/s %.1f\n", n / pass.seconds);
  return failed == 0 ? 0 : 1;
}
