// The properties of SPEC section 5, checked on one concrete case. The same
// functions serve the RC_GTEST_PROP tests and the `check` campaign.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "casefile/case.hpp"
#include "step/mutants.hpp"
#include "step/run_case.hpp"

namespace infonce::properties {

// Property names, stable: they appear in reports and JUnit output.
inline constexpr const char* kGradientMatches = "gradient-matches-reference";     // 1
inline constexpr const char* kUncompensatedRatio = "uncompensated-ratio-is-1/P";  // 2
inline constexpr const char* kCodePathsAgree = "code-paths-agree";                // 3
inline constexpr const char* kScheduleIndependent = "schedule-independent";       // 4
inline constexpr const char* kEqualLoss = "equal-loss-on-every-rank";             // 5
inline constexpr const char* kPaddingSkipsPositive = "padding-skips-positive";    // 6
inline constexpr const char* kNoCrash = "step-runs";  // the distributed step did not throw

std::vector<std::string> property_names();

// The property name of a mutant's CaughtBy.
const char* property_catching(step::CaughtBy caught_by);

struct PropertyFailure {
  std::string property;
  std::string detail;  // one line
};

struct CaseVerdict {
  bool discarded = false;  // the reference rejects the case (e.g. every logit masked)
  std::string discard_reason;
  std::vector<PropertyFailure> failures;
  step::CaseReport report;  // the compensated run (under the mutant, if any)
  bool uncompensated_checked = false;
  bool code_paths_checked = false;
};

struct PropertyOptions {
  const step::Mutant* mutant = nullptr;
  std::uint64_t schedule_seed = 1;  // the random interleaving compared with FIFO
  // The all-reduce sums in an order permuted by this seed (every run of the
  // case); unset: rank order. The result is compared within tolerance.
  std::optional<std::uint64_t> reduction_order_seed;
};

CaseVerdict check_case(const Case& c, const PropertyOptions& options);

}  // namespace infonce::properties
