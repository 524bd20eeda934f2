#include "sim/asan_support.hpp"

#if INFONCE_SIM_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

namespace infonce::sim::detail {

#if INFONCE_SIM_ASAN

void forget_poison(const void* low, std::size_t bytes) noexcept {
  ASAN_UNPOISON_MEMORY_REGION(low, bytes);
}

StackBounds asan_current_stack() noexcept {
  // ASan reports the bounds it had when a switch finishes: switch to an
  // unknown stack and straight back to read them.
  void* fake = nullptr;
  const void* bottom = nullptr;
  std::size_t size = 0;
  __sanitizer_start_switch_fiber(&fake, nullptr, 0);
  __sanitizer_finish_switch_fiber(fake, &bottom, &size);
  __sanitizer_start_switch_fiber(&fake, bottom, size);
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
  return {bottom, size};
}

void AsanSwitches::switching_to(const StackBounds& next) noexcept {
  settle();
  __sanitizer_start_switch_fiber(&fake_stack_, next.bottom, next.size);
  pending_ = true;
}

void AsanSwitches::settle() noexcept {
  if (!pending_) return;
  __sanitizer_finish_switch_fiber(fake_stack_, nullptr, nullptr);
  pending_ = false;
}

#else

void forget_poison(const void*, std::size_t) noexcept {}
StackBounds asan_current_stack() noexcept {
  return {};
}
void AsanSwitches::switching_to(const StackBounds&) noexcept {}
void AsanSwitches::settle() noexcept {}

#endif

}  // namespace infonce::sim::detail
