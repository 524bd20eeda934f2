#include "cli/case_report.hpp"

#include <cstdio>
#include <ostream>

namespace infonce::cli {

OutputJson case_report_json(const Case& c, const step::CaseReport& report) {
  OutputJson document;
  document["loss"] = report.loss;
  document["losses"] = numbers_json(report.losses);
  document["grad"] = matrix_json(report.grad);
  OutputJson reference;
  reference["loss"] = report.reference.loss;
  if (!c.loss.use_batch) reference["shard_losses"] = numbers_json(report.reference.shard_losses);
  reference["grad"] = matrix_json(report.reference.grad);
  document["reference"] = std::move(reference);
  document["ratio"] = report.ratio ? OutputJson(*report.ratio) : OutputJson(nullptr);
  document["max_abs_err"] = report.max_abs_err;
  document["rel_err"] = report.rel_err;
  document["error_scale"] = report.error_scale;
  document["pass"] = report.pass;
  document["checks"] = {{"losses_equal", report.losses_equal},
                        {"grads_consistent", report.grads_consistent},
                        {"loss_matches", report.loss_matches},
                        {"grad_matches", report.grad_matches},
                        {"padded_positives", report.padded_positives},
                        {"rtol", report.tolerance.rtol},
                        {"atol", report.tolerance.atol}};
  if (report.expect) {
    document["expect"] = {{"met", report.expect->met},
                          {"loss_error", report.expect->loss_error},
                          {"grad_error", report.expect->grad_error}};
  }
  return document;
}

void print_before_after(std::ostream& out, const std::vector<BeforeAfterRow>& rows) {
  char line[256];
  std::snprintf(line, sizeof line, "%-34s %20s %20s %12s %10s %6s\n", "", "distributed loss",
                "reference loss", "grad ratio", "max error", "pass");
  out << line;
  for (const auto& row : rows) {
    const auto& r = row.report;
    std::snprintf(line, sizeof line, "%-34s %20.12f %20.12f %12.9f %10.2e %6s\n",
                  row.label.c_str(), r.loss, r.reference.loss, r.ratio ? *r.ratio : 0.0,
                  r.max_abs_err, r.pass ? "yes" : "NO");
    out << line;
  }
}

}  // namespace infonce::cli
