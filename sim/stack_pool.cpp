#include "sim/stack_pool.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <string>

#include "base/assert.hpp"
#include "base/error.hpp"

namespace infonce::sim::detail {

std::size_t StackPool::page_size() {
  static const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return page;
}

StackPool::~StackPool() {
  for (const Mapping& mapping : free_) unmap(mapping);
}

StackPool::Mapping StackPool::map_stack(std::size_t usable) {
  const std::size_t guard = page_size();
  void* base = ::mmap(nullptr, usable + guard, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (base == MAP_FAILED) {
    throw SimulationError("cannot map a fiber stack of " + std::to_string(usable) +
                          " bytes: " + std::strerror(errno));
  }
  // Without a guard the stack still works; it only loses overflow detection.
  if (guarded_ < kMaxGuarded && ::mprotect(base, guard, PROT_NONE) == 0) {
    ++guarded_;
  } else {
    unguarded_.insert(base);
  }
  return Mapping{base, usable};
}

void StackPool::unmap(const Mapping& mapping) noexcept {
  if (unguarded_.erase(mapping.base) == 0) --guarded_;
  ::munmap(mapping.base, mapping.usable + page_size());
}

boost::context::stack_context StackPool::allocate(std::size_t usable_bytes) {
  const std::size_t page = page_size();
  const std::size_t usable = (usable_bytes + page - 1) / page * page;
  Mapping mapping{};
  // Reuse the most recently released stack of this size (its pages are warm).
  for (std::size_t i = free_.size(); i-- > 0;) {
    if (free_[i].usable == usable) {
      mapping = free_[i];
      free_[i] = free_.back();
      free_.pop_back();
      break;
    }
  }
  if (mapping.base == nullptr) mapping = map_stack(usable);
  ++outstanding_;
  boost::context::stack_context stack;
  stack.size = usable;
  stack.sp = static_cast<char*>(mapping.base) + page + usable;
#if INFONCE_SIM_ASAN
  live_.emplace(static_cast<const char*>(mapping.base) + page, usable);
#endif
  return stack;
}

void StackPool::deallocate(boost::context::stack_context& stack) noexcept {
  INFONCE_ASSERT(outstanding_ > 0);
  --outstanding_;
  const std::size_t page = page_size();
  char* low = static_cast<char*>(stack.sp) - stack.size;
#if INFONCE_SIM_ASAN
  live_.erase(low);
#endif
  // Frames unwound by exceptions leave ASan redzones behind; a reused stack
  // must start clean.
  forget_poison(low, stack.size);
  const Mapping mapping{low - page, stack.size};
  if (free_.size() < kMaxCached) {
    free_.push_back(mapping);
  } else {
    unmap(mapping);
  }
}

const std::shared_ptr<StackPool>& thread_stack_pool() {
  thread_local const std::shared_ptr<StackPool> pool = std::make_shared<StackPool>();
  return pool;
}

StackBounds StackPool::stack_containing(const void* address) const {
#if INFONCE_SIM_ASAN
  const char* p = static_cast<const char*>(address);
  auto above = live_.upper_bound(p);
  if (above == live_.begin()) return {};
  const auto& [low, usable] = *std::prev(above);
  if (p < low + usable) return {low, usable};
#else
  (void)address;
#endif
  return {};
}

}  // namespace infonce::sim::detail
