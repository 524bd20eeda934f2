// Property oracle-agrees: the loss/ reference and the distributed step each
// agree with oracle/ (an implementation of SPEC sections 1, 2 and 4 that
// shares no code with them) within the campaign's tolerance. The other
// properties compare the step with a reference computed by the same loss/
// functions, so a slip in those cancels out of them; not out of this one.
#pragma once

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
