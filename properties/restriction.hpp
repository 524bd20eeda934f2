// What an external system under test can run (its handshake's `supports`),
// as a restriction of the generators: every generated CaseSpec is mapped into
// it, so the generators themselves stay as they are and shrinking stays
// inside it too. The default restricts nothing.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "casefile/case.hpp"

namespace infonce::properties {

struct CaseSpec;
struct GeneratorLimits;

struct Restriction {
  static constexpr std::int32_t kNoLimit = std::numeric_limits<std::int32_t>::max();
  // nullopt: both values; otherwise only this one.
  std::optional<bool> use_batch;
  std::optional<bool> accumulation_normalize;
  std::optional<Reduction> reduction;
  std::optional<GatherPath> gather;
  std::optional<ScalarType> scalar;
  bool hard_negatives = true;
  bool mask_fake_negative = true;
  bool include_qq = true;
  bool include_dd = true;
  std::int32_t max_world = kNoLimit;
  std::int32_t max_replicas = kNoLimit;
  bool compensate_false = true;  // cases without the fix (compensate: false) may be generated
  bool partial_window = true;    // cases with accumulation.window < steps may be generated
  std::int32_t min_dim = 1;  // F and D at least (a trainer may squeeze a dimension of 1 away)
  // The padding the cases ask for (the harness's own step: fixed).
  loss::Padding padding = loss::Padding::fixed;

  bool operator==(const Restriction&) const = default;
};

// `spec` moved into the restriction: a value outside it becomes the allowed
// one, too many replicas become the most allowed, and without use_batch a
// shard with no group gets one. The identity when nothing is restricted.
CaseSpec restrict_spec(CaseSpec spec, const Restriction& restriction);

// `c` as the restriction asks (the padding mode).
void restrict_case(Case& c, const Restriction& restriction);

// One line per restricted axis, against the generator's own distribution,
// e.g. "world <= 8 (the distribution has 64)", "gather: object only".
std::vector<std::string> restricted_axes(const Restriction& restriction,
                                         const GeneratorLimits& limits);

}  // namespace infonce::properties
