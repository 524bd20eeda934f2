#include "sim/fiber_scheduler.hpp"

#include <cstdio>
#include <cstdlib>
#include <utility>

#include <boost/fiber/operations.hpp>
#include <boost/fiber/type.hpp>

namespace infonce::sim::detail {

// Constructed on the thread's main context (run_fibers never runs inside a rank).
SeededScheduler::SeededScheduler(SeededScheduler** self)
    : ring_(64, nullptr), main_stack_(asan_current_stack()) {
  *self = this;
}

StackBounds SeededScheduler::stack_of(const boost::fibers::context* ctx) const {
  if (ctx->is_context(boost::fibers::type::main_context)) return main_stack_;
  // A worker's context object sits at the top of its own stack. Boost's
  // dispatcher stack is unknown: it never throws, so ASan need not know it.
  return pool_ != nullptr ? pool_->stack_containing(ctx) : StackBounds{};
}

void SeededScheduler::grow() {
  std::vector<boost::fibers::context*> bigger(ring_.size() * 2, nullptr);
  for (std::size_t i = 0; i < size_; ++i) bigger[i] = slot(i);
  ring_ = std::move(bigger);
  head_ = 0;
}

void SeededScheduler::awakened(boost::fibers::context* ctx) noexcept {
  if (size_ == ring_.size()) grow();
  slot(size_) = ctx;
  ++size_;
}

boost::fibers::context* SeededScheduler::pick_next() noexcept {
  if (size_ == 0) return nullptr;
  if (kind_ == ScheduleKind::random && size_ > 1) {
    // Take a uniformly drawn entry; the front entry takes its place.
    const std::size_t chosen = static_cast<std::size_t>(rng_.below(size_));
    std::swap(slot(chosen), slot(0));
  }
  boost::fibers::context* next = slot(0);
  head_ = (head_ + 1) & (ring_.size() - 1);
  --size_;
  // Boost switches to `next` as soon as this returns.
  if constexpr (INFONCE_SIM_ASAN) asan_switches_.switching_to(stack_of(next));
  return next;
}

void SeededScheduler::suspend_until(std::chrono::steady_clock::time_point const& until) noexcept {
  const bool forever = until == std::chrono::steady_clock::time_point::max();
  if (in_run_ && forever) {
    // Nothing is ready and nothing sleeps: every rank waits on a Boost.Fiber
    // primitive nobody will signal (a wait inside one of our collectives is
    // caught as a deadlock before the last rank blocks). Sleeping would hang.
    std::fputs("infonce sim: every fiber is blocked outside the simulated collectives\n", stderr);
    std::abort();
  }
  std::unique_lock<std::mutex> lock(mutex_);
  if (forever) {
    wakeup_.wait(lock, [this] { return notified_; });
  } else {
    wakeup_.wait_until(lock, until, [this] { return notified_; });
  }
  notified_ = false;
}

void SeededScheduler::notify() noexcept {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    notified_ = true;
  }
  wakeup_.notify_all();
}

void SeededScheduler::begin_run(const Schedule& schedule, const StackPool& pool) {
  pool_ = &pool;
  kind_ = schedule.kind;
  rng_ = Rng(schedule.seed);
  in_run_ = true;
}

void SeededScheduler::end_run() {
  kind_ = ScheduleKind::fifo;
  in_run_ = false;
  pool_ = nullptr;
  // Back on the main context: make its bounds ASan's settled view again.
  asan_switches_.settle();
}

bool SeededScheduler::holds_only_dispatcher() const {
  return size_ == 1 && ring_[head_]->is_context(boost::fibers::type::dispatcher_context);
}

SeededScheduler& thread_scheduler() {
  thread_local SeededScheduler* installed = nullptr;
  if (installed == nullptr) {
    boost::fibers::use_scheduling_algorithm<SeededScheduler>(&installed);
  }
  return *installed;
}

}  // namespace infonce::sim::detail
