// MODEL.md section 6: |G - G_ref| <= atol + rtol * max|G_ref|, elementwise.
#pragma once

#include <cmath>

#include "casefile/case.hpp"

namespace infonce::step {

struct Tolerance {
  double rtol;
  double atol;
};

// Only summation order differs between the distributed step and the reference.
constexpr Tolerance tolerance_for(ScalarType scalar) {
  return scalar == ScalarType::float64 ? Tolerance{1e-12, 1e-14} : Tolerance{1e-5, 1e-7};
}

// Scalars: the same rule with max|ref| = |ref|; two infinities of one sign agree.
inline bool scalar_close(double value, double ref, Tolerance t) {
  if (std::isinf(ref) || std::isinf(value)) return value == ref;
  return std::abs(value - ref) <= t.atol + t.rtol * std::abs(ref);
}

}  // namespace infonce::step
