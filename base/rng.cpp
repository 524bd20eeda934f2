#include "base/rng.hpp"

#include <cmath>
#include <numbers>

namespace infonce {

double Rng::normal() {
  // 1 - unit() is in (0, 1], so the log is finite.
  const double u1 = 1.0 - unit();
  const double u2 = unit();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

}  // namespace infonce
