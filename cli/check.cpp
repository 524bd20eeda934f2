// `infonce-sim check --seed N --cases K [--mutant NAME]`: the property
// campaign outside GoogleTest. On failure: the shrunk case, written as a case
// file, and a one-line command that reproduces it; exit 1. Standard output is
// a function of the options alone (same seed -> same bytes).
#include <cstdio>
#include <filesystem>
#include <ostream>
#include <string>

#include "casefile/case_json.hpp"
#include "cli/case_report.hpp"
#include "cli/command.hpp"
#include "properties/campaign.hpp"
#include "step/mutants.hpp"

namespace infonce::cli {
namespace {
namespace po = boost::program_options;

std::uint64_t fnv1a(const std::string& text) {
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  for (const unsigned char ch : text) hash = (hash ^ ch) * 0x100000001b3ULL;
  return hash;
}

// Content-derived name: the same case always gets the same file, and a
// different case never overwrites it.
std::filesystem::path save_case(const Case& c, const std::filesystem::path& dir) {
  const std::string json = case_to_json(c);
  char name[32];
  std::snprintf(name, sizeof name, "case-%016llx.json",
                static_cast<unsigned long long>(fnv1a(json)));
  std::filesystem::create_directories(dir);
  const std::filesystem::path path = dir / name;
  write_case_file(c, path);
  return path;
}

void print_coverage(std::ostream& out, const properties::Coverage& coverage) {
  out << "coverage (cases per axis value):\n";
  for (const auto& [axis, values] : coverage) {
    out << "  " << axis << ":";
    for (const auto& [value, count] : values) out << " " << value << "=" << count;
    out << "\n";
  }
}

// The seed's table, for representative cases: before and after the fix.
void print_representative_before_after(std::ostream& out) {
  struct Mesh {
    std::int32_t world, dp;
    bool use_batch;
  };
  std::vector<BeforeAfterRow> rows;
  for (const Mesh mesh : {Mesh{2, 2, true}, {4, 2, true}, {4, 4, true}, {8, 4, true},
                          {4, 2, false}}) {
    properties::CaseSpec spec;
    spec.world = mesh.world;
    spec.dp = mesh.dp;
    spec.use_batch = mesh.use_batch;
    spec.negatives.assign(2, std::vector<std::vector<std::int32_t>>(mesh.dp, {2, 1}));
    spec.feature_dim = 4;
    spec.embedding_dim = 3;
    spec.include_qq = true;
    spec.mask_fake_negative = true;
    spec.data_seed = 2026;
    Case c = properties::build_case(spec);
    const std::string label = "W=" + std::to_string(mesh.world) + " P=" + std::to_string(mesh.dp) +
                              (mesh.use_batch ? "" : " local") + ", ";
    c.compensate = false;
    rows.push_back({label + "before the fix", step::run_case(c, nullptr, {})});
    c.compensate = true;
    rows.push_back({label + "with the fix", step::run_case(c, nullptr, {})});
  }
  out << "\nbefore/after the fix (2 micro-steps, 2 groups per rank, qq + masking):\n";
  print_before_after(out, rows);
}

void print_failure(std::ostream& out, const properties::CampaignFailure& failure,
                   const std::filesystem::path& saved, const std::string& mutant) {
  out << "FAILED at case " << failure.case_index << " (shrunk in " << failure.shrink_steps
      << " steps)\n  original: " << properties::describe(failure.original)
      << "\n  shrunk:   " << properties::describe(failure.shrunk) << "\n";
  for (const auto& f : failure.failures) out << "  " << f.property << ": " << f.detail << "\n";
  out << "  saved:    " << saved.string() << "\n  reproduce: infonce-sim run --case "
      << saved.string() << (mutant.empty() ? "" : " --mutant " + mutant) << "\n";
}

int run_check(const CommandContext& context) {
  std::uint64_t seed = 1;
  std::int64_t cases = 1000;
  std::string mutant_name, limits_name = "default", corpus_dir = "corpus/found";
  bool before_after = false;
  po::options_description options("options");
  options.add_options()("seed", po::value(&seed)->value_name("N"), "campaign seed (default 1)")(
      "cases", po::value(&cases)->value_name("K"), "number of generated cases (default 1000)")(
      "mutant", po::value(&mutant_name)->value_name("NAME"), "check a known-wrong variant")(
      "limits", po::value(&limits_name)->value_name("default|typical"), "generator distribution")(
      "corpus-dir", po::value(&corpus_dir)->value_name("DIR"),
      "where a shrunk failure is saved (default corpus/found)")(
      "before-after", po::bool_switch(&before_after), "end with the before/after table of the fix");
  const auto values = parse_command_options(context, options);
  if (!values) return kExitOk;
  if (cases < 1) throw UsageError("check: --cases must be at least 1 (a campaign of no case proves nothing)");
  properties::CampaignOptions campaign;
  campaign.seed = seed;
  campaign.cases = cases;
  if (limits_name == "typical") {
    campaign.limits = properties::typical_limits();
  } else if (limits_name != "default") {
    throw UsageError("check: --limits must be 'default' or 'typical', not '" + limits_name + "'");
  }
  if (!mutant_name.empty()) {
    campaign.mutant = step::find_mutant(mutant_name);
    if (campaign.mutant == nullptr) {
      throw UsageError("check: unknown --mutant '" + mutant_name + "' (see `infonce-sim mutants`)");
    }
  }
  const properties::CampaignResult result = properties::run_campaign(campaign);
  context.out << "check: seed " << seed << ", " << result.cases_run << " cases ("
              << result.discarded << " discarded), mutant "
              << (mutant_name.empty() ? "none" : mutant_name) << "\n";
  for (const auto& [property, count] : result.property_checks) {
    context.out << "  " << property << ": checked " << count << " times\n";
  }
  print_coverage(context.out, result.coverage);
  if (result.failure) {
    const auto saved = save_case(result.failure->shrunk_case, corpus_dir);
    print_failure(context.out, *result.failure, saved, mutant_name);
    return kExitCheckFailed;
  }
  char worst[128];
  std::snprintf(worst, sizeof worst, "worst gradient rel_err: float64 %.3e, float32 %.3e\n",
                result.worst_rel_err, result.worst_rel_err_float);
  context.out << "PASSED: every property held on every case\n" << worst;
  if (before_after) print_representative_before_after(context.out);
  return kExitOk;
}

const RegisterCommand kCheck{
    {"check", "--seed N --cases K [--mutant NAME] [--limits default|typical] [--before-after]",
     "run the property campaign; shrink, save and print a reproducer on failure", run_check}};

}  // namespace
}  // namespace infonce::cli
