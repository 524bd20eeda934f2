// Case budgets of the property tests: full in the normal build, a fraction
// under the sanitizers (they run ~10x slower), so CI stays well under 30 min.
#pragma once

#include <cstdint>
#include <cstdlib>

namespace infonce::properties {

inline std::int64_t scaled_budget(std::int64_t cases) {
  const char* sanitized = std::getenv("INFONCE_SANITIZER_BUILD");
  if (sanitized != nullptr && sanitized[0] == '1') return cases / 20 > 0 ? cases / 20 : 1;
  return cases;
}

}  // namespace infonce::properties
