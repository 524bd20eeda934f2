// The scheduling algorithm every simulated world runs under (internal to sim/).
//
// Boost.Fiber asks its algorithm which ready context runs next at every
// suspension point (a rank blocking in a collective, yielding, finishing).
// FIFO answers "the oldest"; random answers "a uniformly drawn one" from a
// seeded Rng, so the interleaving is a function of the seed alone.
//
// One instance is installed per thread, once, and reset before every run:
// that costs nothing per run and keeps the ready queue in a known state
// (only Boost's dispatcher context) when a run starts, which is what makes a
// random schedule reproducible across runs on the same thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include <boost/fiber/algo/algorithm.hpp>
#include <boost/fiber/context.hpp>

#include "base/rng.hpp"
#include "sim/asan_support.hpp"
#include "sim/fiber_simulation.hpp"
#include "sim/stack_pool.hpp"

namespace infonce::sim::detail {

class SeededScheduler final : public boost::fibers::algo::algorithm {
 public:
  // `self` receives this instance's address (Boost owns the instance).
  explicit SeededScheduler(SeededScheduler** self);

  void awakened(boost::fibers::context* ctx) noexcept override;
  boost::fibers::context* pick_next() noexcept override;
  bool has_ready_fibers() const noexcept override { return size_ > 0; }
  void suspend_until(std::chrono::steady_clock::time_point const& until) noexcept override;
  void notify() noexcept override;

  // Called by run_fibers around a simulation; `pool` holds the ranks' stacks.
  void begin_run(const Schedule& schedule, const StackPool& pool);
  void end_run();
  std::size_t ready_count() const { return size_; }
  // True if the only ready context is Boost's dispatcher (the state between runs).
  bool holds_only_dispatcher() const;

 private:
  boost::fibers::context*& slot(std::size_t i) { return ring_[(head_ + i) & (ring_.size() - 1)]; }
  void grow();
  StackBounds stack_of(const boost::fibers::context* ctx) const;

  // Ready contexts in arrival order, a ring buffer with power-of-two capacity.
  std::vector<boost::fibers::context*> ring_;
  std::size_t head_ = 0;
  std::size_t size_ = 0;

  ScheduleKind kind_ = ScheduleKind::fifo;
  Rng rng_{0};
  bool in_run_ = false;

  // ASan: the stacks switched to (see asan_support.hpp).
  const StackPool* pool_ = nullptr;
  StackBounds main_stack_;
  AsanSwitches asan_switches_;

  // Outside a simulation the thread may sleep until notified (as round_robin does).
  std::mutex mutex_;
  std::condition_variable wakeup_;
  bool notified_ = false;
};

// The calling thread's scheduler, installed with use_scheduling_algorithm on first use.
SeededScheduler& thread_scheduler();

}  // namespace infonce::sim::detail
