// `infonce-sim corpus replay [DIR]`: every case file under DIR (default
// corpus/), recursively, in path order, one line each, then "N passed, M
// failed"; exit 1 if any failed.
//
// A case passes when
//   - it has `expect`: the distributed step meets it (the case's claim about
//     a result, e.g. what real DDP produced);
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
#include <ostream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "casefile/case_json.hpp"
#include "cli/command.hpp"
#include "cli/tool_options.hpp"
#include "properties/campaign.hpp"
#include "properties/properties.hpp"
#include "step/mutants.hpp"
#include "step/run_case.hpp"

namespace infonce::cli {
namespace {
namespace po = boost::program_options;
namespace fs = std::filesystem;

struct Outcome {
  bool passed = false;
  std::string why;  // one line
};

std::string short_number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", value);
  return text;
}

Outcome replay_expect(const Case& c) {
  const step::CaseReport report = step::run_case(c, nullptr, {});
  const step::ExpectCheck& expect = *report.expect;
  const std::string errors = "loss error " + short_number(expect.loss_error) + ", grad error " +
                             short_number(expect.grad_error);
  return {expect.met, (expect.met ? "expect met (" : "expect NOT met (") + errors + ")"};
}

std::string failed_properties(const properties::CaseVerdict& verdict) {
  std::string names;
  for (const auto& f : verdict.failures) names += (names.empty() ? "" : ", ") + f.property;
  return names;
}

Outcome replay_found(const Case& c) {
  const Finding& found = *c.found;
  const std::uint64_t schedule_seed = properties::campaign_schedule_seed(found.seed);
  const properties::CaseVerdict correct = properties::check_case(
      c, {.mutant = nullptr, .schedule_seed = schedule_seed, .reduction_order_seed = std::nullopt});
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
      c, {.mutant = mutant, .schedule_seed = schedule_seed, .reduction_order_seed = std::nullopt});
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

Outcome replay_run(const Case& c) {
  const step::CaseReport report = step::run_case(c, nullptr, {});
  return {report.pass, report.pass ? "run passes (distributed == reference)"
                                   : "run FAILS: rel_err " + short_number(report.rel_err)};
}

Outcome replay_case_file(const fs::path& path) {
  try {
    const Case c = read_case_file(path);
    if (c.expect) return replay_expect(c);
    if (c.found) return replay_found(c);
    return replay_run(c);
  } catch (const InputError& e) {
    return {false, std::string("invalid: ") + e.what()};
  } catch (const SimulationError& e) {
    return {false, std::string("simulation error: ") + e.what()};
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
  const auto values = parse_options_and_words(context, options, "dir", 1);
  if (!values) return kExitOk;
  const fs::path dir =
      values->count("dir") ? (*values)["dir"].as<std::vector<std::string>>().front() : "corpus";
  std::error_code error;
  if (!fs::exists(dir, error))
    throw UsageError("corpus replay: " + dir.string() + ": no such directory");
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
  std::int64_t passed = 0, failed = 0;
  for (const fs::path& file : cases) {
    const Outcome outcome = replay_case_file(file);
    (outcome.passed ? passed : failed)++;
    context.out << (outcome.passed ? "PASS  " : "FAIL  ") << file.string() << "  "
                << one_line(outcome.why) << "\n";
  }
  context.out << passed << " passed, " << failed << " failed";
  const std::size_t skipped = files.size() - cases.size();
  if (skipped > 0) context.out << " (" << skipped << " JSON files without \"format\" skipped)";
  context.out << "\n";
  return failed == 0 ? kExitOk : kExitCheckFailed;
}

const RegisterCommand kCorpusReplay{
    {"corpus replay", "[DIR]",
     "replay every case file under DIR (default corpus/): expect, recorded mutants, or run",
     run_corpus_replay}};

}  // namespace
}  // namespace infonce::cli
