// A case's result as MODEL.md section 8 JSON, its verdict check by check, and
// the seed's before/after table.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "casefile/case.hpp"
#include "cli/output.hpp"
#include "step/run_case.hpp"

namespace infonce::cli {

// One named check of `run`'s verdict. A verdict lists every check with its
// own result, so a failure always names what failed (a case can match the
// reference's gradient and still fail on padding).
struct CaseCheck {
  std::string name;    // "gradient", "loss", "padding" or "expect"
  bool judged = true;  // false: nothing to check (a case file without `expect`)
  bool passed = true;
  std::string detail;  // one line: the figures the result rests on
};

// gradient, loss, padding, expect: in that order, always all four.
std::vector<CaseCheck> case_checks(const Case& c, const step::CaseReport& report);

// Every judged check passed: `run` exits 0.
bool checks_pass(const std::vector<CaseCheck>& checks);

// "padding" or "gradient, padding": the names of the failed checks.
std::string failed_check_names(const std::vector<CaseCheck>& checks);

// The checks, one line each, then "verdict: PASS" or "verdict: FAIL (names)".
void print_checks(std::ostream& out, const std::vector<CaseCheck>& checks);

OutputJson case_report_json(const Case& c, const step::CaseReport& report);

// One row of the before/after table: distributed loss, reference loss,
// distributed/reference gradient ratio, max error, whether the gradient
// matches the reference. A note is printed under the row (what the
// reference means there, when that is not obvious).
struct BeforeAfterRow {
  std::string label;
  step::CaseReport report;
  std::string note;
};
void print_before_after(std::ostream& out, const std::vector<BeforeAfterRow>& rows);

// The note of a use_batch: false row: its reference is the DDP objective.
std::string ddp_objective_note(const step::CaseReport& report);

}  // namespace infonce::cli
