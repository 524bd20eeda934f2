// A case's result as SPEC section 8 JSON, and the seed's before/after table.
#pragma once

#include <iosfwd>
#include <string>

#include "casefile/case.hpp"
#include "cli/output.hpp"
#include "step/run_case.hpp"

namespace infonce::cli {

OutputJson case_report_json(const Case& c, const step::CaseReport& report);

// One row of the before/after table: distributed loss, reference loss,
// distributed/reference gradient ratio, max error, pass.
struct BeforeAfterRow {
  std::string label;
  step::CaseReport report;
};
void print_before_after(std::ostream& out, const std::vector<BeforeAfterRow>& rows);

}  // namespace infonce::cli
