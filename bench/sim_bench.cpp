// Benchmarks of the fiber simulator:
// - per-run overhead of run_fibers for small worlds and trivial programs (the
//   property campaigns run many thousands of small simulations);
// - time per collective with 4096 virtual ranks (all_gather, all_reduce);
// - memory per rank at 4096 ranks: RSS and heap growth over a fresh thread
//   (fresh stack pool) while every rank is alive.
//
// Build: ninja -C <build> sim_bench; run: <build>/bench/sim_bench
#include <benchmark/benchmark.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <thread>
#include <vector>

#include "sim/fiber_simulation.hpp"
#include "sim/mesh.hpp"

namespace infonce::sim {
namespace {

// The whole simulation runs on one thread: its CPU time is what it costs,
// whatever else the machine is doing.
double thread_cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}

SimulationOptions options_for(std::int32_t world, ScheduleKind kind) {
  SimulationOptions options;
  options.world_size = world;
  options.schedule = {kind, 7};
  return options;
}

// ---- Per-run overhead ----

void BM_RunFibersEmpty(benchmark::State& state) {
  const auto options = options_for(static_cast<std::int32_t>(state.range(0)), ScheduleKind::fifo);
  for (auto _ : state) run_fibers(options, [](Communicator&) {});
  state.counters["runs/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_RunFibersEmpty)->Arg(1)->Arg(8)->Arg(64);

void BM_RunFibersOneAllReduce(benchmark::State& state) {
  const auto kind = state.range(1) == 0 ? ScheduleKind::fifo : ScheduleKind::random;
  const auto options = options_for(static_cast<std::int32_t>(state.range(0)), kind);
  for (auto _ : state) {
    run_fibers(options, [](Communicator& comm) {
      double v = comm.world_rank();
      comm.all_reduce(comm.world(), std::span<double>(&v, 1), ReduceOp::sum);
      benchmark::DoNotOptimize(v);
    });
  }
  state.counters["runs/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_RunFibersOneAllReduce)->Args({8, 0})->Args({8, 1})->Args({64, 0})->Args({64, 1});

// ---- Time per collective at scale ----

enum class Kind { all_gather, all_reduce, barrier };

// Runs kCollectives collectives between a barrier and the end of the last
// rank and reports the thread CPU time in between, per collective (the run's
// setup is excluded).
void timed_collectives(benchmark::State& state, Kind kind) {
  const auto world = static_cast<std::int32_t>(state.range(0));
  const auto count = static_cast<std::size_t>(state.range(1));
  constexpr int kCollectives = 8;
  // Third argument 1: every rank passes one shared Group object instead of
  // its own copy (the per-call exact group check then reads hot memory).
  const bool shared = state.range(2) == 1;
  const Group shared_world = world_group_of(world);
  const auto options = options_for(world, ScheduleKind::fifo);
  for (auto _ : state) {
    double start = 0;
    double end = 0;
    run_fibers(options, [&](Communicator& comm) {
      const Group own_world = shared ? Group{} : comm.world();
      const Group& world_group = shared ? shared_world : own_world;
      std::vector<double> values(count, 1.0 + comm.world_rank());
      comm.barrier(world_group);
      if (start == 0) start = thread_cpu_seconds();  // first rank out
      for (int i = 0; i < kCollectives; ++i) {
        switch (kind) {
          case Kind::all_gather:
            benchmark::DoNotOptimize(comm.all_gather(world_group, std::span<const double>(values)));
            break;
          case Kind::all_reduce:
            comm.all_reduce(world_group, std::span<double>(values), ReduceOp::sum);
            break;
          case Kind::barrier:
            comm.barrier(world_group);
            break;
        }
      }
      end = thread_cpu_seconds();  // the last rank done
    });
    state.SetIterationTime((end - start) / kCollectives);
  }
}

void BM_AllGather(benchmark::State& state) {
  timed_collectives(state, Kind::all_gather);
}
void BM_AllReduce(benchmark::State& state) {
  timed_collectives(state, Kind::all_reduce);
}
void BM_Barrier(benchmark::State& state) {
  timed_collectives(state, Kind::barrier);
}
BENCHMARK(BM_AllGather)
    ->Args({64, 1, 0})
    ->Args({4096, 1, 0})
    ->Args({4096, 16, 0})
    ->Args({4096, 1, 1})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AllReduce)
    ->Args({64, 1, 0})
    ->Args({4096, 1, 0})
    ->Args({4096, 1024, 0})
    ->Args({4096, 1, 1})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Barrier)
    ->Args({64, 0, 0})
    ->Args({4096, 0, 0})
    ->Args({4096, 0, 1})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// ---- Memory per rank ----

std::size_t resident_bytes() {
  long pages_total = 0;
  long pages_resident = 0;
  if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages_total, &pages_resident) != 2) pages_resident = 0;
    std::fclose(f);
  }
  return static_cast<std::size_t>(pages_resident) * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

std::size_t heap_in_use() {
  return mallinfo2().uordblks;
}

struct MemoryUse {
  double rss_per_rank = 0;
  double heap_per_rank = 0;
};

// Runs one simulation on a new thread (new scheduler, empty stack pool) and
// measures RSS and heap growth at the point where every rank is alive and
// holds what `kind` gave it.
MemoryUse measure_memory(std::int32_t world, Kind kind) {
  MemoryUse use;
  std::thread thread([&] {
    const std::size_t rss_before = resident_bytes();
    const std::size_t heap_before = heap_in_use();
    std::size_t rss_peak = 0;
    std::size_t heap_peak = 0;
    // One world group shared by every rank (they share an address space):
    // a rank's own copy would be W * 4 bytes, and is the program's, not ours.
    const Group world_group = world_group_of(world);
    run_fibers(options_for(world, ScheduleKind::fifo), [&](Communicator& comm) {
      std::vector<double> result(1, 1.0);
      if (kind == Kind::all_gather) {
        result = comm.all_gather(world_group, std::span<const double>(result));
      } else if (kind == Kind::all_reduce) {
        comm.all_reduce(world_group, std::span<double>(result), ReduceOp::sum);
      }
      comm.barrier(world_group);
      // The first rank out of the barrier sees every rank alive with its result.
      if (rss_peak == 0) {
        rss_peak = resident_bytes();
        heap_peak = heap_in_use();
      }
      benchmark::DoNotOptimize(result.data());
    });
    use.rss_per_rank = (static_cast<double>(rss_peak) - static_cast<double>(rss_before)) / world;
    use.heap_per_rank = (static_cast<double>(heap_peak) - static_cast<double>(heap_before)) / world;
  });
  thread.join();
  return use;
}

void BM_MemoryPerRank(benchmark::State& state) {
  const auto world = static_cast<std::int32_t>(state.range(0));
  const auto kind = static_cast<Kind>(state.range(1));
  MemoryUse use;
  for (auto _ : state) use = measure_memory(world, kind);
  state.counters["rss_bytes_per_rank"] = use.rss_per_rank;
  state.counters["heap_bytes_per_rank"] = use.heap_per_rank;
}
// kind 2: barrier only (the fixed cost of a rank); 0: holding an all_gather result.
BENCHMARK(BM_MemoryPerRank)
    ->Args({4096, 2})
    ->Args({4096, 1})
    ->Args({4096, 0})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace infonce::sim

BENCHMARK_MAIN();
