#include "cli/case_report.hpp"

#include <algorithm>
#include <cstdio>
#include <ostream>

namespace infonce::cli {
namespace {

std::string short_number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", value);
  return text;
}

// Losses with every digit that tells two of them apart in a line.
std::string loss_number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.15g", value);
  return text;
}

std::string numbers_text(const std::vector<double>& numbers) {
  std::string text;
  for (const double n : numbers) text += (text.empty() ? "" : ", ") + short_number(n);
  return text;
}

CaseCheck gradient_check(const step::CaseReport& r) {
  const double bound = r.tolerance.atol + r.tolerance.rtol * r.error_scale;
  CaseCheck check{"gradient", true, r.grad_matches && r.grads_consistent, ""};
  check.detail = "max error " + short_number(r.max_abs_err) + (r.grad_matches ? " <= " : " > ") +
                 "tolerance " + short_number(bound) + " (atol " + short_number(r.tolerance.atol) +
                 " + rtol " + short_number(r.tolerance.rtol) + " x scale " +
                 short_number(r.error_scale) + "), ratio " +
                 (r.ratio ? short_number(*r.ratio) : std::string("undefined (reference 0)"));
  if (!r.grads_consistent) check.detail += "; ranks hold different reduced gradients";
  return check;
}

// The direct parameters as their own parameter group (issue 13).
CaseCheck direct_check(const step::CaseReport& r) {
  if (!r.direct) return {"direct", false, true, "no parameter enters the loss directly"};
  const step::DirectParameterCheck& d = *r.direct;
  const double bound = r.tolerance.atol + r.tolerance.rtol * d.error_scale;
  std::string names;
  for (const std::string& name : d.names) names += (names.empty() ? "" : ", ") + name;
  return {"direct", true, d.matches,
          names + ": step " + numbers_text(d.grad) + ", reference " +
              numbers_text(r.reference.direct_grad) + ", max error " + short_number(d.max_abs_err) +
              (d.matches ? " <= " : " > ") + "tolerance " + short_number(bound) + ", ratio " +
              (d.ratio ? short_number(*d.ratio) : std::string("undefined (reference 0)"))};
}

CaseCheck loss_check(const Case& c, const step::CaseReport& r) {
  CaseCheck check{"loss", true, r.loss_matches && r.losses_equal, ""};
  if (c.loss.use_batch) {
    check.detail =
        "rank 0 reports " + loss_number(r.loss) + ", reference " + loss_number(r.reference.loss);
  } else {
    check.detail = "each rank reports its DP shard's mean (rank 0: " + loss_number(r.loss) +
                   "), reference per shard: " + numbers_text(r.reference.shard_losses);
  }
  if (!r.loss_matches) check.detail += "; a rank's loss differs from the reference";
  if (!r.losses_equal) check.detail += "; ranks holding the same batch report different losses";
  return check;
}

CaseCheck padding_check(const Case& c, const step::CaseReport& r) {
  CaseCheck check{"padding", true, r.padded_positives == 0, ""};
  const bool legacy = c.loss.padding == loss::Padding::legacy;
  if (!c.loss.hard_negatives) {
    check.detail = "no padding (hard_negatives unset)";
  } else if (r.padded_positives == 0) {
    check.detail = std::string("no padding row was a group's positive (padding: ") +
                   (legacy ? "legacy" : "fixed") + ")";
  } else {
    check.detail =
        "padding drew a group's positive as a negative " + std::to_string(r.padded_positives) +
        " time(s)" +
        (legacy ? " (padding: legacy, the trainer's behaviour before its padding fix)" : "");
  }
  return check;
}

CaseCheck expect_check(const Case& c, const step::CaseReport& r) {
  if (!r.expect) return {"expect", false, true, "not judged: the case file has no expect"};
  return {"expect", true, r.expect->met,
          std::string(r.expect->met ? "met" : "NOT met") + ": loss error " +
              short_number(r.expect->loss_error) + ", grad error " +
              short_number(r.expect->grad_error) + " (rtol " + short_number(c.expect->rtol) +
              ", atol " + short_number(c.expect->atol) + ")"};
}

}  // namespace

std::vector<CaseCheck> case_checks(const Case& c, const step::CaseReport& report) {
  std::vector<CaseCheck> checks{gradient_check(report), loss_check(c, report),
                                padding_check(c, report), expect_check(c, report)};
  // Only where the case has direct parameters: the reports of every other
  // case keep their lines and bytes.
  if (report.direct) checks.insert(checks.begin() + 1, direct_check(report));
  return checks;
}

bool checks_pass(const std::vector<CaseCheck>& checks) {
  return std::all_of(checks.begin(), checks.end(),
                     [](const CaseCheck& check) { return !check.judged || check.passed; });
}

std::string failed_check_names(const std::vector<CaseCheck>& checks) {
  std::string names;
  for (const CaseCheck& check : checks) {
    if (check.judged && !check.passed) names += (names.empty() ? "" : ", ") + check.name;
  }
  return names;
}

void print_checks(std::ostream& out, const std::vector<CaseCheck>& checks) {
  char line[32];
  for (const CaseCheck& check : checks) {
    std::snprintf(line, sizeof line, "  %-9s %-5s ", check.name.c_str(),
                  !check.judged  ? "-"
                  : check.passed ? "pass"
                                 : "FAIL");
    out << line << check.detail << "\n";
  }
  out << "verdict: "
      << (checks_pass(checks) ? std::string("PASS") : "FAIL (" + failed_check_names(checks) + ")")
      << "\n";
}

OutputJson case_report_json(const Case& c, const step::CaseReport& report) {
  const std::vector<CaseCheck> checks = case_checks(c, report);
  OutputJson document;
  document["loss"] = report.loss;
  document["losses"] = numbers_json(report.losses);
  document["grad"] = matrix_json(report.grad);
  OutputJson reference;
  reference["loss"] = report.reference.loss;
  if (!c.loss.use_batch) reference["shard_losses"] = numbers_json(report.reference.shard_losses);
  reference["grad"] = matrix_json(report.reference.grad);
  if (report.direct) {
    OutputJson step_direct;
    OutputJson reference_direct;
    for (std::size_t i = 0; i < report.direct->names.size(); ++i) {
      step_direct[report.direct->names[i]] = report.direct->grad[i];
      reference_direct[report.direct->names[i]] = report.reference.direct_grad[i];
    }
    document["direct"] = std::move(step_direct);
    reference["direct"] = std::move(reference_direct);
  }
  document["reference"] = std::move(reference);
  document["ratio"] = report.ratio ? OutputJson(*report.ratio) : OutputJson(nullptr);
  document["max_abs_err"] = report.max_abs_err;
  document["rel_err"] = report.rel_err;
  document["error_scale"] = report.error_scale;
  // `pass` is the verdict (exit 0); `failed` names the checks that failed it.
  document["pass"] = checks_pass(checks);
  OutputJson failed = OutputJson::array();
  for (const CaseCheck& check : checks) {
    if (check.judged && !check.passed) failed.push_back(check.name);
  }
  document["failed"] = std::move(failed);
  OutputJson by_name;
  for (const CaseCheck& check : checks) {
    by_name[check.name] = {{"pass", check.judged ? OutputJson(check.passed) : OutputJson(nullptr)},
                           {"detail", check.detail}};
  }
  by_name["gradient"]["grads_consistent"] = report.grads_consistent;
  by_name["gradient"]["rtol"] = report.tolerance.rtol;
  by_name["gradient"]["atol"] = report.tolerance.atol;
  by_name["loss"]["loss_matches"] = report.loss_matches;
  by_name["loss"]["losses_equal"] = report.losses_equal;
  by_name["padding"]["padded_positives"] = report.padded_positives;
  document["checks"] = std::move(by_name);
  if (report.expect) {
    document["expect"] = {{"met", report.expect->met},
                          {"loss_error", report.expect->loss_error},
                          {"grad_error", report.expect->grad_error}};
  }
  return document;
}

void print_before_after(std::ostream& out, const std::vector<BeforeAfterRow>& rows) {
  char line[256];
  std::snprintf(line, sizeof line, "%-34s %20s %20s %12s %10s %13s\n", "", "distributed loss",
                "reference loss", "grad ratio", "max error", "grad matches");
  out << line;
  for (const auto& row : rows) {
    const auto& r = row.report;
    std::snprintf(line, sizeof line, "%-34s %20.12f %20.12f %12.9f %10.2e %13s\n",
                  row.label.c_str(), r.loss, r.reference.loss, r.ratio ? *r.ratio : 0.0,
                  r.max_abs_err, r.grad_matches ? "yes" : "NO");
    out << line;
    if (!row.note.empty()) out << "    " << row.note << "\n";
  }
}

std::string ddp_objective_note(const step::CaseReport& report) {
  return "use_batch: false: the reference loss is the DDP objective, the mean of the per-rank "
         "means (" +
         numbers_text(report.reference.shard_losses) +
         "); the distributed loss is rank 0's own mean";
}

}  // namespace infonce::cli
