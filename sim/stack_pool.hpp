// Fiber stacks for the simulator (internal to sim/).
//
// A stack is an mmap'd region, committed lazily (a rank pays only for the
// pages it touches), with a PROT_NONE guard page below it so an overflow is a
// clean SIGSEGV instead of silent corruption of a neighbour's memory. Stacks
// are cached per thread and reused, so a run costs no system call once the
// cache is warm: that is most of what makes thousands of small simulations per
// second possible.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include <boost/context/stack_context.hpp>

#include "sim/asan_support.hpp"

namespace infonce::sim::detail {

class StackPool {
 public:
  // Stacks kept for reuse; beyond this they are unmapped when released.
  static constexpr std::size_t kMaxCached = 4096;
  // Guard pages split a mapping in two; the kernel caps mappings per process
  // (vm.max_map_count, 65530 by default), so only this many stacks get one.
  static constexpr std::size_t kMaxGuarded = 8192;

  StackPool() = default;
  StackPool(const StackPool&) = delete;
  StackPool& operator=(const StackPool&) = delete;
  ~StackPool();

  // A stack with `usable_bytes` (rounded up to whole pages) below sp.
  // Throws SimulationError if the system has no memory for it.
  boost::context::stack_context allocate(std::size_t usable_bytes);
  void deallocate(boost::context::stack_context& stack) noexcept;

  // Stacks handed out and not yet returned (0 between runs: a leak check).
  std::size_t outstanding() const { return outstanding_; }
  std::size_t cached() const { return free_.size(); }
  // The outstanding stack containing `address` ({} if none). Tracked only
  // under ASan, which needs the bounds of every stack the thread switches to.
  StackBounds stack_containing(const void* address) const;
  static std::size_t page_size();

 private:
  struct Mapping {
    void* base;
    std::size_t usable;  // bytes above the guard page
  };
  Mapping map_stack(std::size_t usable);
  void unmap(const Mapping& mapping) noexcept;

  std::vector<Mapping> free_;
  std::size_t outstanding_ = 0;
#if INFONCE_SIM_ASAN
  std::map<const char*, std::size_t> live_;  // low end -> usable bytes
#endif
  std::size_t guarded_ = 0;    // live mappings with a guard page
  std::set<void*> unguarded_;  // live mappings without one (rare)
};

// The calling thread's pool. Shared ownership: Boost may release a finished
// fiber's stack late (from its dispatcher), even during thread exit.
const std::shared_ptr<StackPool>& thread_stack_pool();

// Boost.Context StackAllocator drawing from a pool.
class PooledStackAllocator {
 public:
  PooledStackAllocator(std::shared_ptr<StackPool> pool, std::size_t usable_bytes)
      : pool_(std::move(pool)), usable_bytes_(usable_bytes) {}
  boost::context::stack_context allocate() { return pool_->allocate(usable_bytes_); }
  void deallocate(boost::context::stack_context& stack) noexcept { pool_->deallocate(stack); }

 private:
  std::shared_ptr<StackPool> pool_;
  std::size_t usable_bytes_;
};

}  // namespace infonce::sim::detail
