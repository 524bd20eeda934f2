// Fiber stacks: the default holds Eigen-sized stack temporaries, an overflow
// hits the guard page, stacks are reused, and blocking outside collectives
// ends the process instead of hanging it.
#include <gtest/gtest.h>

#include <boost/fiber/condition_variable.hpp>
#include <boost/fiber/mutex.hpp>

#include "sim/fiber_simulation.hpp"
#include "sim/stack_pool.hpp"

namespace infonce::sim {
namespace {

// Touches `bytes` of stack in one frame, as an Eigen product may (alloca up
// to EIGEN_STACK_ALLOCATION_LIMIT = 128 KiB).
__attribute__((noinline)) int touch_stack(std::size_t bytes) {
  char* block = static_cast<char*>(__builtin_alloca(bytes));
  for (std::size_t i = 0; i < bytes; i += 1024) block[i] = static_cast<char>(i / 1024);
  asm volatile("" : : "r"(block) : "memory");
  return block[bytes / 2 / 1024 * 1024];
}

TEST(Stacks, DefaultStackHoldsAnEigenSizedTemporary) {
  SimulationOptions options;
  options.world_size = 4;
  std::vector<int> seen(4);
  run_fibers(options, [&seen](Communicator& comm) {
    comm.barrier(comm.world());
    seen[comm.world_rank()] = touch_stack(160 * 1024);
    comm.barrier(comm.world());
  });
  for (const int s : seen) EXPECT_EQ(s, 80);
}

TEST(Stacks, StacksAreReusedAcrossRuns) {
  SimulationOptions options;
  options.world_size = 16;
  run_fibers(options, [](Communicator&) {});
  const auto& pool = detail::thread_stack_pool();
  EXPECT_EQ(pool->outstanding(), 0u);
  EXPECT_GE(pool->cached(), 16u);
  const std::size_t cached = pool->cached();
  run_fibers(options, [](Communicator&) {});
  EXPECT_EQ(pool->cached(), cached) << "a second run maps no new stack";
}

using StacksDeathTest = ::testing::Test;

__attribute__((noinline)) int recurse(int depth) {
  volatile char frame[512];
  frame[0] = static_cast<char>(depth);
  return depth <= 0 ? frame[0] : recurse(depth - 1) + frame[0];
}

TEST(StacksDeathTest, OverflowHitsTheGuardPage) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  SimulationOptions options;
  options.world_size = 2;
  options.fiber_stack_bytes = 16 * 1024;
  EXPECT_DEATH(run_fibers(options, [](Communicator&) { recurse(1000); }), "");
}

TEST(StacksDeathTest, BlockingOutsideCollectivesAbortsInsteadOfHanging) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  SimulationOptions options;
  options.world_size = 2;
  EXPECT_DEATH(run_fibers(options,
                          [](Communicator&) {
                            boost::fibers::mutex mutex;
                            boost::fibers::condition_variable never;
                            std::unique_lock<boost::fibers::mutex> lock(mutex);
                            never.wait(lock);
                          }),
               "every fiber is blocked outside the simulated collectives");
}

}  // namespace
}  // namespace infonce::sim
