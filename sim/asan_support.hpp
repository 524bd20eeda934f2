// AddressSanitizer support for fiber stacks (internal to sim/).
//
// ASan assumes a thread runs on one stack. On a fiber stack, the
// __asan_handle_no_return it calls before every throw and _Unwind_Resume
// cannot clean up the frames being unwound, and its own bookkeeping then
// writes into their stale poison: false reports. The cure is to announce
// every stack switch (__sanitizer_start/finish_switch_fiber); the scheduler
// does that, since Boost.Fiber asks it for the next context before each
// switch. Compiles to nothing without ASan.
#pragma once

#include <cstddef>

#if defined(__SANITIZE_ADDRESS__)
#define INFONCE_SIM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define INFONCE_SIM_ASAN 1
#endif
#endif
#ifndef INFONCE_SIM_ASAN
#define INFONCE_SIM_ASAN 0
#endif

namespace infonce::sim::detail {

struct StackBounds {
  const void* bottom = nullptr;  // lowest address; nullptr: unknown
  std::size_t size = 0;
};

// Marks [low, low + bytes) addressable again (no-op without ASan).
void forget_poison(const void* low, std::size_t bytes) noexcept;

// The stack ASan currently believes the thread runs on (no-op: {} without ASan).
StackBounds asan_current_stack() noexcept;

// One announced switch at a time: finish the pending one (we now run on its
// destination), then start the next (no-ops without ASan).
class AsanSwitches {
 public:
  void switching_to(const StackBounds& next) noexcept;
  void settle() noexcept;  // finish the pending switch, if any

 private:
  // Used only when built with ASan (asan_support.cpp).
  [[maybe_unused]] bool pending_ = false;
  [[maybe_unused]] void* fake_stack_ = nullptr;
};

}  // namespace infonce::sim::detail
