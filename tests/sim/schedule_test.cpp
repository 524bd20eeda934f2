// The scheduler: FIFO, seeded random interleavings that are reproducible
// from the seed alone, and repeated runs on one thread (and on several).
#include <gtest/gtest.h>

#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "base/error.hpp"
#include "sim/fiber_simulation.hpp"

namespace infonce::sim {
namespace {

using Event = std::pair<std::int32_t, int>;  // (world rank, step)

// The order in which ranks pass the points between collectives: it is the
// interleaving itself (results must never depend on it).
std::vector<Event> interleaving(const Schedule& schedule, std::int32_t world = 6, int steps = 4) {
  SimulationOptions options;
  options.world_size = world;
  options.schedule = schedule;
  std::vector<Event> log;
  run_fibers(options, [&log, steps](Communicator& comm) {
    for (int step = 0; step < steps; ++step) {
      log.emplace_back(comm.world_rank(), step);
      comm.barrier(comm.world());
    }
    log.emplace_back(comm.world_rank(), steps);
  });
  return log;
}

TEST(Schedule, FifoStartsRanksInRankOrder) {
  const std::vector<Event> log = interleaving({ScheduleKind::fifo, 0});
  ASSERT_EQ(log.size(), 6u * 5u);
  for (std::int32_t w = 0; w < 6; ++w) EXPECT_EQ(log[w], Event(w, 0));
}

TEST(Schedule, FifoIgnoresTheSeed) {
  EXPECT_EQ(interleaving({ScheduleKind::fifo, 0}), interleaving({ScheduleKind::fifo, 99}));
}

TEST(Schedule, SameSeedSameInterleaving) {
  for (std::uint64_t seed = 0; seed < 10; ++seed) {
    EXPECT_EQ(interleaving({ScheduleKind::random, seed}),
              interleaving({ScheduleKind::random, seed}))
        << "seed " << seed;
  }
}

TEST(Schedule, DifferentSeedsExploreDifferentInterleavings) {
  std::set<std::vector<Event>> seen;
  for (std::uint64_t seed = 0; seed < 20; ++seed)
    seen.insert(interleaving({ScheduleKind::random, seed}));
  EXPECT_GE(seen.size(), 15u);
  EXPECT_FALSE(seen.contains(interleaving({ScheduleKind::fifo, 0})));
}

// A random schedule does not wait for a collective to reorder ranks: the
// order ranks start in already varies.
TEST(Schedule, RandomScheduleVariesTheStartOrder) {
  std::set<std::int32_t> first_ranks;
  for (std::uint64_t seed = 0; seed < 30; ++seed) {
    first_ranks.insert(interleaving({ScheduleKind::random, seed}).front().first);
  }
  EXPECT_GE(first_ranks.size(), 4u);
}

// Whatever ran on the thread before (other schedules, failures), a seed
// gives the same interleaving.
TEST(Schedule, HistoryOfTheThreadDoesNotLeakIntoAnInterleaving) {
  const std::vector<Event> before = interleaving({ScheduleKind::random, 7});
  for (std::uint64_t seed = 0; seed < 5; ++seed) {
    interleaving({ScheduleKind::random, seed}, 9, 2);
    SimulationOptions failing;
    failing.world_size = 5;
    failing.schedule = {ScheduleKind::random, seed};
    failing.fault = {2, 1, FaultInjection::Kind::early_return};
    EXPECT_THROW(run_fibers(failing,
                            [](Communicator& comm) {
                              comm.barrier(comm.world());
                              comm.barrier(comm.world());
                            }),
                 SimulationError);
  }
  EXPECT_EQ(interleaving({ScheduleKind::random, 7}), before);
}

TEST(Schedule, ManyRunsOnOneThread) {
  SimulationOptions options;
  options.world_size = 8;
  std::int64_t total = 0;
  for (int run = 0; run < 2000; ++run) {
    options.schedule = {run % 2 == 0 ? ScheduleKind::fifo : ScheduleKind::random,
                        static_cast<std::uint64_t>(run)};
    run_fibers(options, [&total](Communicator& comm) {
      double v = 1.0;
      comm.all_reduce(comm.world(), std::span<double>(&v, 1), ReduceOp::sum);
      if (comm.world_rank() == 0) total += static_cast<std::int64_t>(v);
    });
  }
  EXPECT_EQ(total, 2000 * 8);
}

// Each thread has its own scheduler and stack pool.
TEST(Schedule, IndependentSimulationsOnSeveralThreads) {
  std::vector<std::vector<Event>> logs(3);
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < logs.size(); ++t) {
    threads.emplace_back([&logs, t] {
      for (int repeat = 0; repeat < 50; ++repeat) logs[t] = interleaving({ScheduleKind::random, 7});
    });
  }
  for (std::thread& thread : threads) thread.join();
  const std::vector<Event> here = interleaving({ScheduleKind::random, 7});
  for (const auto& log : logs) EXPECT_EQ(log, here);
}

TEST(Schedule, ThousandsOfRanks) {
  SimulationOptions options;
  options.world_size = 3000;
  options.schedule = {ScheduleKind::random, 3};
  std::vector<double> sums(3000);
  run_fibers(options, [&sums](Communicator& comm) {
    double v = comm.world_rank();
    comm.all_reduce(comm.world(), std::span<double>(&v, 1), ReduceOp::sum);
    sums[comm.world_rank()] = v;
  });
  for (const double s : sums) EXPECT_EQ(s, 2999.0 * 3000.0 / 2.0);
}

}  // namespace
}  // namespace infonce::sim
