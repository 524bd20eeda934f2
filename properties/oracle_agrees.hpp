// Property oracle-agrees: the loss/ reference and the distributed step each
// agree with oracle/ (an implementation of SPEC sections 1, 2 and 4 that
// shares no code with them) within the campaign's tolerance. The other
// properties compare the step with a reference computed by the same loss/
// functions, so a slip in those cancels out of them; not out of this one.
#pragma once

#include <optional>

#include "casefile/case.hpp"
#include "properties/oracle_case.hpp"
#include "properties/properties.hpp"
#include "step/run_case.hpp"

namespace infonce::properties {

// Adds a kOracleAgrees failure to `verdict` when the reference or the step
// differs from the oracle, or the oracle finds no defined loss where the
// reference did. `distributed` is the step's run of `c` (under the mutant).
void check_oracle_agrees(const Case& c, const step::DistributedResult& distributed,
                         const step::ReferenceValues& reference, CaseVerdict& verdict);

// The oracle's values of `c` where oracle-agrees judges it (oracle_judges);
// none otherwise. Adds a kOracleAgrees failure where the oracle rejects a case
// the reference accepted (not under the fake-negative mask, where an exact
// tie can mask a whole row on one side of the rounding).
std::optional<OracleValues> judging_oracle(const Case& c, CaseVerdict& verdict);

// check_oracle_agrees with the oracle's values of `c` (judging_oracle).
void check_oracle_agrees(const Case& c, const step::DistributedResult& distributed,
                         const step::ReferenceValues& reference, const OracleValues& oracle,
                         CaseVerdict& verdict);

// A step that rounds in its own order (an external SUT) against the
// reference in `report` (what evaluate_owed made of it): its losses and
// gradient within twice the allowance oracle-agrees gives each against the
// oracle, once for the reference's rounding and once for the step's. The
// campaign's fixed rtol cannot hold there: a loss near 0 or a softmax near 1
// is a difference of logits, whose rounding scales with the largest |logit|.
// Sets report.loss_matches, grad_matches and pass, and error_scale to what the
// allowance stands for (scaled_err with it).
void admit_own_rounding(const Case& c, const OracleValues& oracle, step::CaseReport& report);

// The fraction of oracle-agrees' tolerance that the difference between
// `values` (the loss and gradient of the code under test) and the oracle's
// uses: at most 1 passes. Infinite for a non-finite difference.
double tolerance_used(const Case& c, const step::ReferenceValues& values,
                      const OracleValues& oracle);

// Whether oracle-agrees judges `c` at all: not when a mask decision is closer
// than the case's precision rounds a similarity, nor when an embedding's
// direction is undetermined in it (such a case is counted, not judged).
bool oracle_judges(const Case& c, const OracleValues& oracle);

}  // namespace infonce::properties
