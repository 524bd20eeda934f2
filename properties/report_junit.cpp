// JUnit XML, the format CI systems render: one testsuite, one testcase per
// property (and one for the mutant and the self-check when they apply). A
// failed property carries the shrunk case and the commands that reproduce it.
// No timestamps or durations: the same campaign gives the same bytes.
#include <ostream>
#include <sstream>

#include "casefile/case_json.hpp"
#include "properties/campaign_report.hpp"
#include "step/mutants.hpp"

namespace infonce::properties {
namespace {

struct TestCase {
  TestCase(std::string classname_, std::string name_)
      : classname(std::move(classname_)), name(std::move(name_)) {}
  std::string classname;
  std::string name;
  enum class Status { passed, failed, skipped } status = Status::passed;
  std::string message;  // one line
  std::string text;     // the failure's body
};

std::string failure_body(const CampaignReport& report) {
  std::ostringstream body;
  write_failure_text(body, report);
  body << "\nshrunk case file:\n" << case_to_json(report.result.failure->shrunk_case);
  return body.str();
}

std::vector<TestCase> property_cases(const CampaignReport& report) {
  const CampaignResult& r = report.result;
  std::vector<TestCase> cases;
  for (const std::string& property : property_names()) {
    TestCase test{"infonce-sim.properties", property};
    const auto checked = r.property_checks.find(property);
    if (r.failure) {
      for (const auto& f : r.failure->failures) {
        if (f.property != property) continue;
        test.status = TestCase::Status::failed;
        test.message = "case " + std::to_string(r.failure->case_index) + ": " + f.detail;
        test.text = failure_body(report);
        break;
      }
    }
    if (test.status == TestCase::Status::passed &&
        (checked == r.property_checks.end() || checked->second == 0)) {
      test.status = TestCase::Status::skipped;
      test.message = "no generated case was one this property applies to";
    } else if (test.status == TestCase::Status::passed) {
      test.message = "held on " + std::to_string(checked->second) + " cases";
    }
    cases.push_back(std::move(test));
  }
  return cases;
}

// Under a mutant the harness is on trial: the mutant must be caught.
TestCase mutant_case(const CampaignReport& report) {
  const bool caught = report.result.failure.has_value();
  TestCase test{"infonce-sim.mutants", report.mutant + " is caught"};
  if (!caught) {
    test.status = TestCase::Status::failed;
    test.message = "not caught in " + std::to_string(report.result.cases_run) + " cases";
  } else {
    test.message = "caught at case " + std::to_string(report.result.failure->case_index) + " by " +
                   report.result.failure->failures.front().property;
  }
  return test;
}

TestCase self_check_test(const CampaignReport& report) {
  const CampaignResult& r = report.result;
  TestCase test{"infonce-sim.self-check", "reruns are bit-identical"};
  test.message = std::to_string(r.self_checked) + " cases rerun";
  if (r.divergence) {
    test.status = TestCase::Status::failed;
    test.message = "case " + std::to_string(r.divergence->case_index) + ": " + r.divergence->detail;
  }
  return test;
}

// The discard budget (campaign_report.hpp): failed when the share exceeds it.
TestCase discard_budget_test(const CampaignReport& report) {
  TestCase test{"infonce-sim.discards", "within the discard budget"};
  test.message = std::to_string(report.result.discarded) + " of " +
                 std::to_string(report.result.cases_run) + " cases discarded";
  if (const auto failure = report.discard_budget_failure()) {
    test.status = TestCase::Status::failed;
    test.message = *failure;
  }
  return test;
}

void write_case(std::ostream& out, const TestCase& test) {
  out << "    <testcase classname=\"" << xml_escape(test.classname) << "\" name=\""
      << xml_escape(test.name) << "\"";
  switch (test.status) {
    case TestCase::Status::passed:
      out << "/>\n";
      return;
    case TestCase::Status::skipped:
      out << ">\n      <skipped message=\"" << xml_escape(test.message) << "\"/>\n";
      break;
    case TestCase::Status::failed:
      out << ">\n      <failure type=\"property-failed\" message=\"" << xml_escape(test.message)
          << "\">" << xml_text(test.text) << "</failure>\n";
      break;
  }
  out << "    </testcase>\n";
}

}  // namespace

std::string xml_text(std::string_view text) {
  std::string out = xml_escape(text);
  // Quotes need no escaping in element text: keep the case JSON readable.
  for (const auto& [entity, plain] :
       {std::pair<std::string, std::string>{"&quot;", "\""}, {"&apos;", "'"}}) {
    for (std::size_t at = out.find(entity); at != out.npos; at = out.find(entity, at + 1)) {
      out.replace(at, entity.size(), plain);
    }
  }
  return out;
}

std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char ch : text) {
    const auto byte = static_cast<unsigned char>(ch);
    switch (ch) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        // XML 1.0 forbids control characters other than tab, newline, CR.
        if (byte < 0x20 && ch != '\t' && ch != '\n' && ch != '\r') {
          out += '?';
        } else {
          out += ch;
        }
    }
  }
  return out;
}

void write_report_junit(std::ostream& out, const CampaignReport& report) {
  std::vector<TestCase> cases = property_cases(report);
  if (!report.mutant.empty()) cases.push_back(mutant_case(report));
  if (report.self_check) cases.push_back(self_check_test(report));
  cases.push_back(discard_budget_test(report));
  std::int64_t failures = 0, skipped = 0;
  for (const TestCase& test : cases) {
    failures += test.status == TestCase::Status::failed;
    skipped += test.status == TestCase::Status::skipped;
  }
  const std::string suite = "infonce-sim check seed " + std::to_string(report.seed) +
                            (report.mutant.empty() ? "" : " mutant " + report.mutant);
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      << "<testsuites name=\"infonce-sim\" tests=\"" << cases.size() << "\" failures=\"" << failures
      << "\" errors=\"0\" skipped=\"" << skipped << "\">\n"
      << "  <testsuite name=\"" << xml_escape(suite) << "\" tests=\"" << cases.size()
      << "\" failures=\"" << failures << "\" errors=\"0\" skipped=\"" << skipped << "\">\n"
      << "    <properties>\n";
  auto property = [&](const std::string& name, const std::string& value) {
    out << "      <property name=\"" << xml_escape(name) << "\" value=\"" << xml_escape(value)
        << "\"/>\n";
  };
  property("seed", std::to_string(report.seed));
  if (!report.seed_source.empty()) property("seed_source", report.seed_source);
  property("mutant", report.mutant.empty() ? "none" : report.mutant);
  property("limits", report.limits);
  property("cases_run", std::to_string(report.result.cases_run));
  property("discarded", std::to_string(report.result.discarded));
  for (const auto& [reason, count] : report.result.discards_by_reason) {
    property("discarded: " + reason, std::to_string(count));
  }
  out << "    </properties>\n";
  for (const TestCase& test : cases) write_case(out, test);
  std::ostringstream summary;
  write_report_text(summary, report);
  out << "    <system-out>" << xml_text(summary.str()) << "</system-out>\n"
      << "  </testsuite>\n</testsuites>\n";
}

}  // namespace infonce::properties
