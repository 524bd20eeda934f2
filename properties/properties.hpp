// The properties of MODEL.md section 5, checked on one concrete case. The same
// functions serve the RC_GTEST_PROP tests and the `check` campaign.
#pragma once

#include <cstdint>
#include <functional>
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
// The loss/ reference and the distributed step both agree with oracle/, an
// implementation of SPEC sections 1, 2 and 4 that shares no code with them.
inline constexpr const char* kOracleAgrees = "oracle-agrees";
// The loss/ reference accepts every case the oracle finds a defined loss for:
// a reference that throws InputError on such a case would otherwise turn it
// into a silent discard (issue 30).
inline constexpr const char* kReferenceAcceptsValid = "reference-accepts-valid-input";

std::vector<std::string> property_names();

// The fix's scale s = P (use_batch, mean reduction), else 1: a step run with
// `compensate: false` gives exactly reference / fix_scale (property 2).
double fix_scale(const Case& c);
// What the step of `c` owes the reference: 1, or fix_scale for a case run
// without the fix (compensate: false).
double owed_divisor(const Case& c);

// Where oracle-agrees runs. sampled: on every case whose oracle work
// (oracle_work) is at most kOracleWorkBound, and above it on every
// kOracleSampleEvery-th case index: a deterministic sample. every: on every
// case, float32 cases with the fake-negative mask included (a mask decision
// within the case's rounding is a near tie, counted and not judged:
// oracle_judges in properties/oracle_agrees.hpp).
enum class OracleMode { every, sampled, off };
inline constexpr std::int64_t kOracleWorkBound = 250'000;
inline constexpr std::int64_t kOracleSampleEvery = 16;

// The similarity multiply-adds the oracle spends on `c`: per micro-step,
// groups x logit-row length x D (an upper bound on the row length), plus
// the encoder's rows x D x F.
std::int64_t oracle_work(const Case& c);
bool oracle_applies(const Case& c, OracleMode mode, std::int64_t case_index);

// The property name of a mutant's CaughtBy.
const char* property_catching(step::CaughtBy caught_by);

// A number in a failure's detail: 6 significant digits (%g style, as
// std::ostream writes it at precision 6).
std::string format_detail(double value);

struct PropertyFailure {
  std::string property;
  std::string detail;  // one line
};

struct CaseVerdict {
  bool discarded = false;  // the reference rejects the case (e.g. every logit masked)
  std::string discard_reason;
  // An external step's reason for declining the case (then discarded too):
  // counted and reported, never a failure.
  std::string declined;
  std::vector<PropertyFailure> failures;
  step::CaseReport report;  // the compensated run (under the mutant, if any)
  bool uncompensated_checked = false;
  bool code_paths_checked = false;
  bool schedule_checked = true;  // false for an external step (no schedule of ours to vary)
  bool oracle_checked = false;
  // The reference rejected the case and the oracle was asked whether it is
  // valid (kReferenceAcceptsValid): a discard only when the oracle rejects it too.
  bool rejection_checked = false;
  // false where an external step's result cannot be judged against the
  // reference: a mask decision or an embedding's direction within rounding
  // (properties/sut_step.cpp); gradient-matches-reference is not counted then.
  bool reference_checked = true;
};

struct PropertyOptions {
  const step::Mutant* mutant = nullptr;
  std::uint64_t schedule_seed = 1;  // the random interleaving compared with FIFO
  OracleMode oracle = OracleMode::every;
  std::int64_t case_index = 0;  // the campaign's index of the case (the oracle's sample)
  // The all-reduce sums in an order permuted by this seed (every run of the
  // case); unset: rank order. The result is compared within tolerance.
  std::optional<std::uint64_t> reduction_order_seed;
};

CaseVerdict check_case(const Case& c, const PropertyOptions& options);

// How the reference values of a case are computed: step::compute_case_reference,
// unless a test hands in a reference of its own (no hook in production code).
using ReferenceFunction = std::function<step::ReferenceValues(const Case&)>;

// The reference values of `c`; none when the reference rejects the case
// (InputError). Unless `oracle` is off, the oracle is then asked: where it
// finds a defined loss (and judges the case: no mask decision or embedding
// direction within rounding), the rejection is a kReferenceAcceptsValid
// failure; otherwise `verdict` records a discard with the reference's reason.
std::optional<step::ReferenceValues> reference_or_discard(
    const Case& c, OracleMode oracle, CaseVerdict& verdict,
    const ReferenceFunction& reference = step::compute_case_reference);

// A discard reason with its numbers taken out ("group 3: every logit is
// masked" -> "group N: every logit is masked"): the reports count discards
// by this kind.
std::string discard_kind(const std::string& reason);

// The step's report against what it owes: the reference, or reference / P
// (property 2, then counted as checked and shown in reference_divided_by).
step::CaseReport evaluate_owed(const Case& c, const step::DistributedResult& result,
                               const step::ReferenceValues& reference, CaseVerdict& verdict);

// The properties judged from a step's reported values alone (an external
// step's): every rank's loss agrees, no padded positive, the reference matches.
void check_reported_step(const step::CaseReport& report, CaseVerdict& verdict);
// Property 2 on a gradient obtained with compensate false.
void check_uncompensated_gradient(const Case& c, const Matrix<double>& grad,
                                  const step::ReferenceValues& reference, CaseVerdict& verdict);

}  // namespace infonce::properties
