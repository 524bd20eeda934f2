// `infonce-sim replay`: reproduce one failure exactly.
//
//   replay --seed S --case-index I [--mutant NAME] [--limits L]
//       regenerates case I of seed S, checks it as the campaign did and, if it
//       fails, shrinks it the same way: the same shrunk case, the same lines
//       as `check` printed (and the same corpus file, saved again or found).
//   replay FILE [--mutant NAME|none]
//       checks a case file (e.g. a corpus entry) against every property, under
//       the mutant its `found` record names unless --mutant says otherwise.
// Exit 1 when the case fails (the failure is reproduced), 0 when it passes.
#include <memory>
#include <optional>
#include <ostream>
#include <string>

#include "base/error.hpp"
#include "casefile/case_json.hpp"
#include "cli/command.hpp"
#include "cli/tool_options.hpp"
#include "properties/campaign.hpp"
#include "properties/campaign_report.hpp"
#include "properties/sut_step.hpp"
#include "step/mutants.hpp"
#include "sut/protocol.hpp"

namespace infonce::cli {
namespace {
namespace po = boost::program_options;

constexpr std::int64_t kMaxCaseIndex = 1'000'000'000'000'000;

std::int64_t parse_case_index(const std::string& text) {
  const bool digits = !text.empty() && text.size() <= 16 &&
                      text.find_first_not_of("0123456789") == std::string::npos;
  if (!digits || std::stoll(text) > kMaxCaseIndex) {
    throw UsageError("replay: --case-index must be a whole number >= 0, not '" +
                     text.substr(0, 40) + "'");
  }
  return std::stoll(text);
}

struct RawOptions {
  std::string seed, case_index, mutant, limits = "default", corpus_dir, oracle = "every";
  bool given_seed = false, given_index = false, given_limits = false, given_corpus_dir = false;
  bool no_corpus = false;
  std::vector<std::string> files;
  std::optional<std::string> sut, sut_timeout;
  std::vector<std::string> restrict;
};

// The SUT the options name (nullptr: none), with one process.
std::unique_ptr<properties::SutStep> start_replay_sut(const RawOptions& raw) {
  const SutChoice choice = parse_sut("replay", raw.sut, raw.sut_timeout);
  if (choice.command.empty()) return nullptr;
  if (!raw.mutant.empty()) {
    throw UsageError("replay: --mutant changes the harness's own step, not a --sut");
  }
  return start_sut(choice, 1);
}

int replay_generated(const CommandContext& context, const RawOptions& raw) {
  if (!raw.given_seed || !raw.given_index) {
    throw UsageError("replay: give a case FILE, or both --seed S and --case-index I");
  }
  if (raw.no_corpus && raw.given_corpus_dir) {
    throw UsageError("replay: --no-corpus and --corpus-dir contradict each other");
  }
  if (raw.given_corpus_dir && raw.corpus_dir.empty()) {
    throw UsageError("replay: --corpus-dir must not be empty");
  }
  const SeedChoice seed = parse_seed("replay", raw.seed);
  const std::int64_t index = parse_case_index(raw.case_index);
  properties::CampaignOptions options;
  options.seed = seed.seed;
  options.limits = parse_limits("replay", raw.limits);
  options.mutant = parse_mutant("replay", raw.mutant);
  options.oracle = parse_oracle("replay", raw.oracle);
  const std::string corpus_dir = raw.corpus_dir.empty() ? kDefaultCorpusFoundDir : raw.corpus_dir;
  if (!raw.no_corpus) check_writable_dir("replay", "--corpus-dir", corpus_dir);

  const std::unique_ptr<properties::SutStep> sut = start_replay_sut(raw);
  if (sut) {
    options.external = sut.get();
    options.limits.restriction = sut->restriction();
    for (const std::string& option : raw.restrict) {
      apply_restrict_option("replay", option, options.limits.restriction);
    }
  } else if (!raw.restrict.empty()) {
    throw UsageError("replay: --restrict needs --sut CMD");
  }
  const properties::CaseReplay replay = properties::replay_case(options, index);
  context.out << "replay: seed " << seed.seed << ", case " << index << ", mutant "
              << (options.mutant ? std::string(options.mutant->name) : "none") << "\n";
  if (sut) context.out << "  sut:      " << sut->handshake().name << "\n";
  context.out << "  case:     " << properties::describe(replay.spec) << "\n";
  if (replay.verdict.discarded) {
    context.out << "DISCARDED: the reference rejects this case (" << replay.verdict.discard_reason
                << "); the campaign skips it\n";
    return kExitOk;
  }
  if (!replay.failure) {
    context.out << "PASSED: every property held on this case\n";
    return kExitOk;
  }
  properties::CampaignReport report;
  report.program = std::string(context.program);
  report.seed = seed.seed;
  report.mutant = options.mutant ? std::string(options.mutant->name) : "";
  report.limits = raw.limits;
  if (sut) {
    report.sut_command = *raw.sut;
    report.sut_name = sut->handshake().name;
    report.sut_timeout = raw.sut_timeout.value_or("");
    report.restrict_options = raw.restrict;
  }
  report.result.failure = replay.failure;
  auto& failure = *report.result.failure;
  Finding found;
  if (options.mutant) found.mutant = report.mutant;
  found.property = failure.failures.front().property;
  found.seed = seed.seed;
  found.case_index = index;
  found.limits = raw.limits;
  failure.shrunk_case.found = found;
  if (!raw.no_corpus)
    report.saved_case = save_corpus_case(failure.shrunk_case, corpus_dir).string();
  properties::write_failure_text(context.out, report);
  return kExitCheckFailed;
}

void print_failures(std::ostream& out, const properties::CaseVerdict& verdict) {
  for (const auto& f : verdict.failures) out << "  " << f.property << ": " << f.detail << "\n";
}

// A case file through the SUT: every property of an external step.
int replay_file_on_sut(const CommandContext& context, const std::string& path, const Case& c,
                       properties::SutStep& sut, properties::OracleMode oracle) {
  if (const auto axis = sut::outside_supports(c, sut.handshake().supports)) {
    throw InputError(path + ": the SUT cannot run this case (" + *axis + ", per its handshake)");
  }
  context.out << "replay: " << path << "\n  sut:      " << sut.handshake().name << "\n";
  properties::PropertyOptions options;
  options.oracle = oracle;
  const properties::CaseVerdict verdict = sut.check(c, 0, options);
  if (verdict.discarded) {
    throw InputError(path + ": the reference rejects the case: " + verdict.discard_reason);
  }
  print_failures(context.out, verdict);
  const bool expect_met = !verdict.report.expect || verdict.report.expect->met;
  if (!expect_met) context.out << "  expect:   NOT met by the SUT's step\n";
  if (verdict.failures.empty() && expect_met) {
    context.out << "PASSED: every property held on this case\n";
    return kExitOk;
  }
  context.out << "FAILED on this case\n";
  return kExitCheckFailed;
}

int replay_file(const CommandContext& context, const RawOptions& raw) {
  if (raw.given_seed || raw.given_index || raw.given_limits || raw.given_corpus_dir ||
      raw.no_corpus) {
    throw UsageError(
        "replay: a case FILE takes only --mutant or --sut (--seed, --case-index, --limits "
        "and the corpus options regenerate a case instead)");
  }
  if (!raw.restrict.empty()) {
    throw UsageError("replay: --restrict narrows generation (--seed, --case-index), not a FILE");
  }
  const std::string& path = raw.files.front();
  const Case c = read_case_file(path);
  if (const std::unique_ptr<properties::SutStep> sut = start_replay_sut(raw)) {
    return replay_file_on_sut(context, path, c, *sut, parse_oracle("replay", raw.oracle));
  }
  const step::Mutant* mutant = nullptr;
  std::string mutant_origin;
  if (!raw.mutant.empty()) {
    mutant = parse_mutant("replay", raw.mutant);
    mutant_origin = "--mutant";
  } else if (c.found && c.found->mutant) {
    mutant = step::find_mutant(*c.found->mutant);
    if (mutant == nullptr) {
      throw InputError(path + ": found.mutant: '" + *c.found->mutant +
                       "' is not a known mutant (see `infonce-sim mutants`)");
    }
    mutant_origin = "the file's found record";
  }
  const std::uint64_t seed = c.found ? c.found->seed : 1;
  const properties::CaseVerdict verdict =
      properties::check_case(c, {.mutant = mutant,
                                 .schedule_seed = properties::campaign_schedule_seed(seed),
                                 .oracle = parse_oracle("replay", raw.oracle),
                                 .reduction_order_seed = std::nullopt});
  context.out << "replay: " << path << "\n";
  if (c.found) {
    context.out << "  found:    seed " << c.found->seed << ", case " << c.found->case_index
                << ", property " << c.found->property << ", limits " << c.found->limits << "\n";
  }
  context.out << "  mutant:   "
              << (mutant ? std::string(mutant->name) + " (from " + mutant_origin + ")" : "none")
              << "\n";
  if (verdict.discarded) {
    throw InputError(path + ": the reference rejects the case: " + verdict.discard_reason);
  }
  for (const auto& f : verdict.failures)
    context.out << "  " << f.property << ": " << f.detail << "\n";
  if (verdict.failures.empty()) {
    context.out << "PASSED: every property held on this case\n";
    return kExitOk;
  }
  context.out << "FAILED: " << verdict.failures.size() << " propert"
              << (verdict.failures.size() == 1 ? "y fails" : "ies fail") << " on this case\n";
  return kExitCheckFailed;
}

int run_replay(const CommandContext& context) {
  RawOptions raw;
  po::options_description options("options");
  options.add_options()("seed", po::value(&raw.seed)->value_name("SEED"),
                        "the campaign seed (as check takes it)")(
      "case-index", po::value(&raw.case_index)->value_name("I"), "the failing case's index")(
      "mutant", po::value(&raw.mutant)->value_name("NAME"),
      "the known-wrong variant ('none': the correct step, even if the file names a mutant)")(
      "limits", po::value(&raw.limits)->value_name("default|typical"), "generator distribution")(
      "oracle", po::value(&raw.oracle)->value_name("every|sampled|off"),
      "where oracle-agrees runs (default every)")(
      "corpus-dir", po::value(&raw.corpus_dir)->value_name("DIR"),
      "where the shrunk case is saved (default corpus/found, relative to the working directory)")(
      "no-corpus", po::bool_switch(&raw.no_corpus), "do not save the shrunk case");
  add_sut_options(options);
  const auto values = parse_options_and_words(context, options, "file", 1);
  if (!values) return kExitOk;
  raw.given_seed = values->count("seed") > 0;
  raw.given_index = values->count("case-index") > 0;
  raw.given_limits = values->count("limits") > 0;
  raw.given_corpus_dir = values->count("corpus-dir") > 0;
  if (values->count("sut")) raw.sut = (*values)["sut"].as<std::string>();
  if (values->count("sut-timeout")) raw.sut_timeout = (*values)["sut-timeout"].as<std::string>();
  if (values->count("restrict")) raw.restrict = (*values)["restrict"].as<std::vector<std::string>>();
  if (values->count("file")) {
    raw.files = (*values)["file"].as<std::vector<std::string>>();
    return replay_file(context, raw);
  }
  return replay_generated(context, raw);
}

const RegisterCommand kReplay{
    {"replay",
     "--seed SEED --case-index I [--mutant NAME] [--limits L] | FILE [--mutant NAME] "
     "[--sut CMD [--sut-timeout S]]",
     "reproduce a campaign's failure exactly: regenerate and shrink case I, or check a case file",
     run_replay}};

}  // namespace
}  // namespace infonce::cli
