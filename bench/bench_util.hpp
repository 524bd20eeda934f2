// Shared helpers of the bench programs: a thread-CPU-time clock, a
// median-of-repetitions measurement, /proc readings. Header-only, bench/ only.
#pragma once

#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace infonce::bench {

// CPU time of the calling thread (user + system), in seconds. The simulator
// runs every rank as a fiber of this thread, so this is the whole cost of a
// simulated step, and it does not count time the thread spends descheduled.
inline double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct Measurement {
  double seconds = 0;            // per call: the median over repetitions
  std::int32_t repetitions = 0;  // 1: a single (cold) call, too long to repeat
  std::int64_t calls_per_repetition = 0;
};

inline double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// Times `call`: one call first (it also warms caches and pools); if that took
// at least `single_run_seconds` it is the figure. Otherwise `repetitions`
// repetitions, each of enough calls to last `min_repetition_seconds`, and the
// median of their per-call times.
template <class F>
Measurement measure(F&& call, double min_repetition_seconds = 0.02, double single_run_seconds = 1.0,
                    std::int32_t repetitions = 5) {
  const double start = thread_cpu_seconds();
  call();
  const double first = thread_cpu_seconds() - start;
  if (first >= single_run_seconds) return {first, 1, 1};
  const auto calls = static_cast<std::int64_t>(
      std::max(1.0, std::ceil(min_repetition_seconds / std::max(first, 1e-9))));
  std::vector<double> per_call;
  for (std::int32_t r = 0; r < repetitions; ++r) {
    const double t0 = thread_cpu_seconds();
    for (std::int64_t i = 0; i < calls; ++i) call();
    per_call.push_back((thread_cpu_seconds() - t0) / static_cast<double>(calls));
  }
  return {median(per_call), repetitions, calls};
}

// A "Key:   value kB" line of /proc/self/status, in bytes (-1 if absent).
inline std::int64_t proc_status_bytes(const std::string& key) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(key + ":", 0) == 0) return 1024 * std::stoll(line.substr(key.size() + 1));
  }
  return -1;
}

// Resets VmHWM (peak RSS) to the current RSS (Linux: clear_refs "5").
// Returns false where the kernel does not allow it.
inline bool reset_peak_rss() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";
  clear.close();
  return static_cast<bool>(clear);
}

// The CPU as /proc/cpuinfo names it, and the number of logical CPUs listed.
inline std::string machine_line() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, model = "unknown CPU";
  int cpus = 0;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0 && cpus++ == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) model = line.substr(colon + 2);
    }
  }
  return model + " (" + std::to_string(cpus) + " logical CPUs)";
}

}  // namespace infonce::bench
