// `infonce-sim corpus pick --seed S --cases K --out DIR [--baseline]`:
// distils a campaign into a few case files that together cover every axis
// value its K cases covered (greedy set cover: the case adding the most
// uncovered values first, the cheapest on ties), and saves them under DIR.
// With --baseline each file gets an `expect` holding the current result of
// the distributed step: a regression baseline recorded by the code under
// test, not an independent oracle (say so wherever such files are kept).
#include <algorithm>
#include <ostream>
#include <set>
#include <string>

#include "base/error.hpp"
#include "cli/command.hpp"
#include "cli/tool_options.hpp"
#include "properties/campaign.hpp"
#include "step/run_case.hpp"
#include "step/tolerance.hpp"

namespace infonce::cli {
namespace {
namespace po = boost::program_options;

constexpr std::int64_t kMaxPickCases = 1'000'000;

using AxisValue = std::pair<std::string, std::string>;

std::set<AxisValue> axis_values(const properties::CaseSpec& spec) {
  properties::Coverage coverage;
  properties::add_coverage(spec, coverage);
  std::set<AxisValue> values;
  for (const auto& [axis, counts] : coverage) {
    for (const auto& [value, count] : counts) values.insert({axis, value});
  }
  return values;
}

// The work a case costs to replay: ranks times rows.
std::int64_t cost_of(const properties::CaseSpec& spec) {
  std::int64_t rows = 0;
  for (const auto& micro : spec.negatives) {
    for (const auto& shard : micro) {
      for (const std::int32_t k : shard) rows += k + 2;
    }
  }
  return static_cast<std::int64_t>(spec.world) * rows * (spec.feature_dim + spec.embedding_dim);
}

bool rejected_by_reference(const Case& c) {
  try {
    step::compute_case_reference(c);
    return false;
  } catch (const InputError&) {
    return true;
  }
}

// The current distributed result as the case's expectation, with the
// tolerance of the case's scalar type, loosened for future summation orders.
void record_baseline(Case& c) {
  const step::CaseReport report = step::run_case(c, nullptr, {});
  const step::Tolerance t = step::tolerance_for(c.scalar);
  c.expect = Expectation{report.loss, report.grad, t.rtol * 100, t.atol * 100,
                         report.direct ? report.direct->grad : std::vector<double>{}};
}

struct Candidate {
  std::int64_t index;
  properties::CaseSpec spec;
  std::set<AxisValue> values;
  std::int64_t cost;
};

int run_corpus_pick(const CommandContext& context) {
  std::string seed_text = "1", cases_text, limits = "default", out;
  bool baseline = false;
  po::options_description options("options");
  options.add_options()("seed", po::value(&seed_text)->value_name("SEED"), "campaign seed")(
      "cases", po::value(&cases_text)->value_name("K"), "cases to choose from")(
      "limits", po::value(&limits)->value_name("default|typical"), "generator distribution")(
      "out", po::value(&out)->value_name("DIR"), "where the chosen case files go")(
      "baseline", po::bool_switch(&baseline),
      "record the current result as each case's expect (a regression baseline)");
  const auto values = parse_command_options(context, options);
  if (!values) return kExitOk;
  require_option(context, *values, "cases", "K");
  require_option(context, *values, "out", "DIR");
  const SeedChoice seed = parse_seed("corpus pick", seed_text);
  const std::int64_t cases = parse_count("corpus pick", "--cases", cases_text, kMaxPickCases);
  const properties::GeneratorLimits generator = parse_limits("corpus pick", limits);
  check_writable_dir("corpus pick", "--out", out);

  std::vector<Candidate> candidates;
  for (std::int64_t i = 0; i < cases; ++i) {
    properties::CaseSpec spec = properties::generate_spec(seed.seed, i, generator);
    auto covered = axis_values(spec);
    candidates.push_back({i, std::move(spec), std::move(covered), 0});
    candidates.back().cost = cost_of(candidates.back().spec);
  }
  std::set<AxisValue> uncovered;
  for (const Candidate& c : candidates) uncovered.insert(c.values.begin(), c.values.end());
  const std::size_t total = uncovered.size();
  std::int64_t picked = 0;
  while (!uncovered.empty() && !candidates.empty()) {
    auto gain = [&](const Candidate& c) {
      return std::count_if(c.values.begin(), c.values.end(),
                           [&](const AxisValue& v) { return uncovered.count(v) > 0; });
    };
    const auto best = std::min_element(
        candidates.begin(), candidates.end(), [&](const Candidate& a, const Candidate& b) {
          const auto ga = gain(a), gb = gain(b);
          return ga != gb ? ga > gb : a.cost != b.cost ? a.cost < b.cost : a.index < b.index;
        });
    const Candidate chosen = *best;
    candidates.erase(best);
    Case c = properties::build_case(chosen.spec);
    if (rejected_by_reference(c)) continue;
    const auto added = gain(chosen);
    for (const AxisValue& v : chosen.values) uncovered.erase(v);
    if (baseline) record_baseline(c);
    const auto path = save_corpus_case(c, out);
    context.out << "case " << chosen.index << ": " << added << " new axis value"
                << (added == 1 ? "" : "s") << " -> " << path.string() << "\n";
    ++picked;
  }
  context.out << "picked " << picked << " cases covering " << total - uncovered.size() << " of "
              << total << " axis values\n";
  return kExitOk;
}

const RegisterCommand kCorpusPick{
    {"corpus pick", "--seed SEED --cases K --out DIR [--limits L] [--baseline]",
     "save a few generated cases that together cover every axis value of a campaign",
     run_corpus_pick}};

}  // namespace
}  // namespace infonce::cli
