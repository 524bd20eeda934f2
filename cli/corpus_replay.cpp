// `infonce-sim corpus replay [DIR]`: every case file under DIR (default
// corpus/), recursively, in path order, one line each, then "N passed, M
// failed"; exit 1 if any failed.
//
// A case passes when
//   - it has `expect`: the distributed step meets it (the case's claim about
//     a result, e.g. what real DDP produced); only that is judged, and any
//     check of `run` that fails is named on the line;
//   - it has a `found` record naming a mutant: that mutant still fails it
//     (with the recorded property) and the correct step passes every property
//     (a regression test of the harness itself);
//   - it has a `found` record without a mutant (a bug the campaign found in the
//     step): the step now passes every property;
//   - otherwise: `run` passes (distributed == reference).
// JSON files without a top-level "format" key (e.g. reference outputs kept
// next to cases) are not case files and are skipped.
#include <algorithm>
#include <fstream>
#include <memory>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "casefile/case_json.hpp"
#include "cli/case_report.hpp"
#include "cli/command.hpp"
#include "cli/tool_options.hpp"
#include "properties/campaign.hpp"
#include "properties/oracle_agrees.hpp"
#include "properties/properties.hpp"
#include "properties/sut_step.hpp"
#include "step/mutants.hpp"
#include "step/run_case.hpp"
#include "sut/protocol.hpp"

namespace infonce::cli {
namespace {
namespace po = boost::program_options;
namespace fs = std::filesystem;

struct Outcome {
  bool passed = false;
  std::string why;  // one line
  bool skipped = false;  // --sut: outside what the SUT supports
};

std::string short_number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", value);
  return text;
}

// A file with `expect` claims a result (what real DDP produced, or a
// recorded baseline): only that claim is judged. The checks `run` makes
// against the reference are still named when they fail, so the two views
// never disagree silently (a real-trainer file with legacy padding meets its
// expect, and `run` fails it on padding).
Outcome replay_expect(const Case& c) {
  const step::CaseReport report = step::run_case(c, nullptr, {});
  const step::ExpectCheck& expect = *report.expect;
  std::string why = std::string(expect.met ? "expect met (" : "expect NOT met (") + "loss error " +
                    short_number(expect.loss_error) + ", grad error " +
                    short_number(expect.grad_error) + ")";
  std::vector<CaseCheck> run_checks = case_checks(c, report);
  std::erase_if(run_checks, [](const CaseCheck& check) { return check.name == "expect"; });
  if (!checks_pass(run_checks)) {
    why += "; not judged here, `run` fails: ";
    for (const CaseCheck& check : run_checks) {
      if (!check.passed) why += check.name + " (" + check.detail + ")";
    }
  }
  return {expect.met, why};
}

std::string failed_properties(const properties::CaseVerdict& verdict) {
  std::string names;
  for (const auto& f : verdict.failures) names += (names.empty() ? "" : ", ") + f.property;
  return names;
}

Outcome replay_found(const Case& c, properties::OracleMode oracle) {
  const Finding& found = *c.found;
  const std::uint64_t schedule_seed = properties::campaign_schedule_seed(found.seed);
  const properties::CaseVerdict correct = properties::check_case(
      c, {.mutant = nullptr, .schedule_seed = schedule_seed, .oracle = oracle,
          .reduction_order_seed = std::nullopt});
  if (correct.discarded)
    return {false, "the reference rejects the case: " + correct.discard_reason};
  if (!found.mutant) {
    if (!correct.failures.empty()) {
      return {false, "the step still fails " + failed_properties(correct) + ": " +
                         correct.failures.front().detail};
    }
    return {true, "the bug found at seed " + std::to_string(found.seed) + " case " +
                      std::to_string(found.case_index) + " stays fixed"};
  }
  const step::Mutant* mutant = step::find_mutant(*found.mutant);
  if (mutant == nullptr)
    return {false, "found.mutant '" + *found.mutant + "' is not a known mutant"};
  const properties::CaseVerdict caught = properties::check_case(
      c, {.mutant = mutant, .schedule_seed = schedule_seed, .oracle = oracle,
          .reduction_order_seed = std::nullopt});
  const bool still_caught = std::any_of(
      caught.failures.begin(), caught.failures.end(),
      [&](const properties::PropertyFailure& f) { return f.property == found.property; });
  if (!still_caught) {
    return {false,
            "mutant " + *found.mutant + " is no longer caught by " + found.property +
                (caught.failures.empty() ? "" : " (fails: " + failed_properties(caught) + ")")};
  }
  if (!correct.failures.empty()) {
    return {false, "mutant " + *found.mutant +
                       " is caught, but the correct step fails too: " + failed_properties(correct)};
  }
  return {true, "mutant " + *found.mutant + " still caught by " + found.property +
                    "; the correct step passes"};
}

// A file with neither `expect` nor `found`: run passes, and (unless --oracle
// off) every property holds, oracle-agrees included: how the oracle judges
// the corpus's CLIP and learnable-temperature cases (corpus/families/).
Outcome replay_run(const Case& c, properties::OracleMode oracle) {
  const step::CaseReport report = step::run_case(c, nullptr, {});
  const std::vector<CaseCheck> checks = case_checks(c, report);
  if (checks_pass(checks) && oracle != properties::OracleMode::off) {
    properties::CaseVerdict verdict;
    properties::check_oracle_agrees(c, step::run_on_fibers(c, {}, {}),
                                    step::compute_case_reference(c), verdict);
    if (!verdict.failures.empty()) {
      return {false, "run passes, but oracle-agrees fails: " + verdict.failures.front().detail};
    }
    if (verdict.oracle_checked) return {true, "run passes (distributed == reference), the oracle agrees"};
  }
  if (checks_pass(checks)) return {true, "run passes (distributed == reference)"};
  std::string why = "run FAILS:";
  for (const CaseCheck& check : checks) {
    if (check.judged && !check.passed) why += " " + check.name + " (" + check.detail + ")";
  }
  return {false, why};
}

Outcome replay_case_file(const fs::path& path, properties::OracleMode oracle) {
  try {
    const Case c = read_case_file(path);
    if (c.expect) return replay_expect(c);
    if (c.found) return replay_found(c, oracle);
    return replay_run(c, oracle);
  } catch (const InputError& e) {
    return {false, std::string("invalid: ") + e.what()};
  } catch (const SimulationError& e) {
    return {false, std::string("simulation error: ") + e.what()};
  }
}

// --sut: the case through the SUT. A case with `expect` passes when the SUT
// meets it; any other case when every property of an external step holds,
// whatever its found record says (the SUT is on trial, not a mutant).
Outcome replay_on_sut(const fs::path& path, properties::SutStep& sut,
                      properties::OracleMode oracle) {
  try {
    const Case c = read_case_file(path);
    if (const auto axis = sut::outside_supports(c, sut.handshake().supports)) {
      return {false, "outside what the SUT supports: " + *axis, true};
    }
    properties::PropertyOptions options;
    options.oracle = oracle;
    const properties::CaseVerdict verdict = sut.check(c, 0, options);
    if (!verdict.declined.empty()) {
      return {false, "declined by the SUT: " + verdict.declined, true};
    }
    if (verdict.discarded) return {false, "the reference rejects the case: " + verdict.discard_reason};
    const bool ran = std::none_of(
        verdict.failures.begin(), verdict.failures.end(),
        [](const properties::PropertyFailure& f) { return f.property == properties::kNoCrash; });
    // A case with `expect` claims a result (e.g. the trainer before the fix
    // on real DDP): the SUT must reproduce it, not the reference.
    if (ran && verdict.report.expect) {
      const step::ExpectCheck& expect = *verdict.report.expect;
      const std::string errors = "loss error " + short_number(expect.loss_error) +
                                 ", grad error " + short_number(expect.grad_error);
      return {expect.met, (expect.met ? "the SUT meets expect (" : "the SUT does NOT meet expect (") +
                              errors + ")"};
    }
    if (!verdict.failures.empty()) {
      const std::string ratio =
          ran ? "; gradient ratio " +
                    (verdict.report.ratio ? short_number(*verdict.report.ratio)
                                          : std::string("undefined")) +
                    " of the reference"
              : "";
      return {false, "the SUT fails " + failed_properties(verdict) + ": " +
                         verdict.failures.front().detail + ratio};
    }
    return {true, "every property held on the SUT"};
  } catch (const InputError& e) {
    return {false, std::string("invalid: ") + e.what()};
  }
}

// A JSON file is a case file when its top level has "format" (a broken case
// file still counts, and fails); anything unparseable also counts.
bool is_case_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  const auto document = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  return document.is_discarded() || !document.is_object() || document.contains("format");
}

std::string one_line(std::string text) {
  for (char& ch : text) {
    if (ch == '\n' || ch == '\r' || ch == '\t') ch = ' ';
  }
  return text;
}

int run_corpus_replay(const CommandContext& context) {
  po::options_description options("options");
  add_sut_options(options, /*with_restrict=*/false);
  std::string oracle_text = "every";
  options.add_options()("oracle", po::value(&oracle_text)->value_name("every|sampled|off"),
                        "whether oracle-agrees runs on found cases (default every)");
  const auto values = parse_options_and_words(context, options, "dir", 1);
  if (!values) return kExitOk;
  const properties::OracleMode oracle = parse_oracle("corpus replay", oracle_text);
  std::optional<std::string> sut_command, sut_timeout;
  if (values->count("sut")) sut_command = (*values)["sut"].as<std::string>();
  if (values->count("sut-timeout")) sut_timeout = (*values)["sut-timeout"].as<std::string>();
  const SutChoice sut_choice = parse_sut("corpus replay", sut_command, sut_timeout);
  const fs::path dir =
      values->count("dir") ? (*values)["dir"].as<std::vector<std::string>>().front() : "corpus";
  std::error_code error;
  if (!fs::exists(dir, error))
    throw UsageError("corpus replay: " + dir.string() + ": no such directory" +
                     (values->count("dir") ? ""
                                           : " (the default, corpus/ in the working "
                                             "directory; give DIR)"));
  if (!fs::is_directory(dir, error)) {
    throw UsageError("corpus replay: " + dir.string() + ": not a directory");
  }
  std::vector<fs::path> files;
  for (auto it = fs::recursive_directory_iterator(dir, error);
       !error && it != fs::recursive_directory_iterator(); it.increment(error)) {
    if (it->is_regular_file(error) && it->path().extension() == ".json")
      files.push_back(it->path());
  }
  if (error) throw InputError("corpus replay: " + dir.string() + ": " + error.message());
  std::sort(files.begin(), files.end());
  std::vector<fs::path> cases;
  for (const fs::path& file : files) {
    if (is_case_file(file)) cases.push_back(file);
  }
  if (cases.empty()) throw UsageError("corpus replay: " + dir.string() + ": no case file found");
  const std::unique_ptr<properties::SutStep> sut =
      sut_choice.command.empty() ? nullptr : start_sut(sut_choice, 1);
  if (sut) context.out << "sut: " << sut->handshake().name << "\n";
  std::int64_t passed = 0, failed = 0, outside = 0;
  for (const fs::path& file : cases) {
    const Outcome outcome = sut ? replay_on_sut(file, *sut, oracle) : replay_case_file(file, oracle);
    (outcome.skipped ? outside : outcome.passed ? passed : failed)++;
    context.out << (outcome.skipped ? "SKIP  " : outcome.passed ? "PASS  " : "FAIL  ")
                << file.string() << "  " << one_line(outcome.why) << "\n";
  }
  context.out << passed << " passed, " << failed << " failed";
  if (sut) context.out << ", " << outside << " outside what the SUT supports";
  const std::size_t skipped = files.size() - cases.size();
  if (skipped > 0) context.out << " (" << skipped << " JSON files without \"format\" skipped)";
  context.out << "\n";
  return failed == 0 ? kExitOk : kExitCheckFailed;
}

const RegisterCommand kCorpusReplay{
    {"corpus replay", "[DIR] [--sut CMD [--sut-timeout S]]",
     "replay every case file under DIR (default corpus/ in the working directory): expect, "
     "recorded mutants, or run",
     run_corpus_replay}};

}  // namespace
}  // namespace infonce::cli
