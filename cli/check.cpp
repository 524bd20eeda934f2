// `infonce-sim check`: the property campaign outside GoogleTest, as a CI tool.
//
//   budgets   --cases K and/or --time-budget 10m (whichever ends first)
//   workers   --jobs N (the result does not depend on N)
//   shards    --shard i/N (disjoint cases; `merge` recombines the reports)
//   seeds     --seed N | 0xHEX | COMMIT | git
//   profiles  --profile ci (fixed seed, case budget) | explore (commit seed, time budget)
//   output    --format human|json|junit on stdout; --report FILE.{json,xml,svg,html}
//
// On failure: the shrunk case is saved under the corpus directory with a
// `found` record, and the commands that reproduce it are printed; exit 1.
// Standard output is a function of the options alone (same seed and budget:
// same bytes), except that a time budget makes the case count the clock's;
// the time budget and the progress line (stderr, terminals only) are the only
// readers of the clock.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <ostream>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "base/error.hpp"
#include "casefile/case_json.hpp"
#include "cli/case_report.hpp"
#include "cli/command.hpp"
#include "cli/strategy_grid_report.hpp"
#include "cli/strategy_report.hpp"
#include "cli/tool_options.hpp"
#include "properties/campaign.hpp"
#include "properties/campaign_report.hpp"
#include "properties/strategy_campaign.hpp"
#include "properties/strategy_grid.hpp"
#include "properties/sut_step.hpp"
#include "step/mutants.hpp"

namespace infonce::cli {
namespace {
namespace po = boost::program_options;
using Clock = std::chrono::steady_clock;

constexpr std::int64_t kMaxCases = 1'000'000'000'000;
constexpr std::int64_t kCiCases = 10'000;
// --strategies --profile ci: every point and family, the oracle on each case;
// about 20 s on one core of the CI machine.
constexpr std::int64_t kCiStrategyCases = 4'000;
constexpr const char* kExploreTime = "10m";

struct CheckSettings : CampaignSettings {
  bool before_after = false;
  std::optional<SutChoice> sut;
};

// What was typed; an option given as "" is still given (and then invalid).
struct RawOptions {
  std::optional<std::string> seed, cases, time_budget, jobs, shard, profile, mutant, limits, format,
      corpus_dir, sut, sut_timeout, oracle, strategies, family, case_index, case_file;
  std::vector<std::string> reports, restrict;
  bool no_corpus = false, before_after = false, self_check = false;
};

void take(const po::variables_map& values, const char* key, std::optional<std::string>& into) {
  if (values.count(key)) into = values[key].as<std::string>();
}

po::options_description check_options(RawOptions& raw) {
  po::options_description options("options");
  options.add_options()(
      "seed", po::value<std::string>()->value_name("SEED"),
      "campaign seed: a number, 0xHEX, a git commit hash, or 'git' (HEAD) (default 1)")(
      "cases", po::value<std::string>()->value_name("K"),
      "case budget (default 1000; none with only --time-budget)")(
      "time-budget", po::value<std::string>()->value_name("DURATION"),
      "stop after this long, e.g. 10m, 90s, 1h30m (the output says how many cases ran)")(
      "jobs,j", po::value<std::string>()->value_name("N"),
      "worker threads, or 'auto' (default 1; results do not depend on it)")(
      "shard", po::value<std::string>()->value_name("I/N"),
      "run shard I of N: disjoint cases; `infonce-sim merge` joins the JSON reports")(
      "profile", po::value<std::string>()->value_name("ci|explore"),
      "ci: seed 1, 10000 cases, no clock; explore: seed from the commit, 10m, self-check")(
      "mutant", po::value<std::string>()->value_name("NAME"), "check a known-wrong variant")(
      "strategies", po::value<std::string>()->value_name("all|POINT"),
      "the strategy campaign instead: each case at a strategy point (all: drawn from the 36 dp "
      "points, a case with replicas at the point's /world twin every other time; or one, e.g. "
      "autograd/local/scale-P/mean or detached-own-live/global/scale-W/mean/world), its gradient "
      "against the prediction")(
      "family", po::value<std::string>()->value_name("both|infonce|clip|ntxent|siglip|all"),
      "with --strategies: the loss families drawn (default both: every other case CLIP); all: "
      "the grid, every family x every point (or the one point named), each cell an even share "
      "of --cases run at its point and family alone, one row per cell, exit 1 if a cell is not "
      "as predicted (--jobs N runs cells in parallel)")(
      "case-index", po::value<std::string>()->value_name("I"),
      "with --strategies: run case I of the campaign alone (a reproducer the report prints)")(
      "case", po::value<std::string>()->value_name("FILE"),
      "with --strategies POINT: judge one saved case file at POINT (a reproducer the report "
      "prints)")(
      "oracle", po::value<std::string>()->value_name("every|sampled|off"),
      "where oracle-agrees runs (default sampled: every case up to a size bound, above it every "
      "16th)")("limits", po::value<std::string>()->value_name("default|typical"),
               "generator distribution")("format",
                                         po::value<std::string>()->value_name("human|json|junit"),
                                         "what standard output gets (default human)")(
      "report", po::value(&raw.reports)->value_name("FILE"),
      "also write FILE: .json (merge input), .xml (JUnit), .svg or .html (a picture); repeatable")(
      "corpus-dir", po::value<std::string>()->value_name("DIR"),
      "where a shrunk failure is saved (default corpus/found, relative to the working directory)")(
      "no-corpus", po::bool_switch(&raw.no_corpus), "do not save the shrunk failure")(
      "self-check", po::bool_switch(&raw.self_check),
      "rerun every 16th case (generation, reference, the step with no shared losses and under "
      "another schedule) and compare every bit")(
      "before-after", po::bool_switch(&raw.before_after),
      "end with the before/after table of the fix (human format)")(
      "backend", po::value<std::string>()->value_name("fiber|mpi"),
      "fiber (default): the campaign in this process, on the fiber simulator; mpi: sharded over "
      "the processes of an MPI job (`mpirun -np N infonce-sim check --backend mpi ...`, the same "
      "as check-mpi), one merged report");
  add_sut_options(options);
  return options;
}

void take_all(const po::variables_map& values, RawOptions& raw) {
  take(values, "seed", raw.seed);
  take(values, "cases", raw.cases);
  take(values, "time-budget", raw.time_budget);
  take(values, "jobs", raw.jobs);
  take(values, "shard", raw.shard);
  take(values, "profile", raw.profile);
  take(values, "mutant", raw.mutant);
  take(values, "limits", raw.limits);
  take(values, "format", raw.format);
  take(values, "corpus-dir", raw.corpus_dir);
  take(values, "sut", raw.sut);
  take(values, "sut-timeout", raw.sut_timeout);
  if (values.count("restrict")) raw.restrict = values["restrict"].as<std::vector<std::string>>();
  take(values, "oracle", raw.oracle);
  take(values, "strategies", raw.strategies);
  take(values, "family", raw.family);
  take(values, "case-index", raw.case_index);
  take(values, "case", raw.case_file);
}

void apply_profile(const RawOptions& raw, CheckSettings& s) {
  if (!raw.profile) return;
  if (*raw.profile == "ci") {
    if (raw.time_budget) {
      throw UsageError(
          "check: --time-budget cannot be used with --profile ci (a CI run is "
          "derandomised: a fixed seed and a case budget)");
    }
    if (!raw.cases) s.campaign.cases = kCiCases;
    if (!raw.jobs) s.campaign.jobs = parse_jobs("check", "auto");
  } else if (*raw.profile == "explore") {
    if (!raw.seed) {
      const SeedChoice seed = parse_seed("check", "git");
      s.campaign.seed = seed.seed;
      s.report.seed_source = seed.source;
    }
    if (!raw.time_budget) {
      s.time_budget_seconds = parse_duration_seconds("check", kExploreTime);
      s.report.time_budget = kExploreTime;
      if (!raw.cases) s.campaign.cases = properties::kUnboundedCases;
    }
    if (!raw.jobs) s.campaign.jobs = parse_jobs("check", "auto");
    s.campaign.self_check = true;
  } else {
    throw UsageError("check: --profile must be 'ci' or 'explore', not '" +
                     raw.profile->substr(0, 40) + "'");
  }
}

void settle_sut(const RawOptions& raw, CheckSettings& s);

CheckSettings settle(const RawOptions& raw) {
  CheckSettings s;
  s.report.limits = raw.limits.value_or("default");
  s.campaign.limits = parse_limits("check", s.report.limits);
  s.campaign.mutant = parse_mutant("check", raw.mutant.value_or(""));
  s.report.mutant = s.campaign.mutant ? std::string(s.campaign.mutant->name) : "";
  s.campaign.oracle = parse_oracle("check", raw.oracle.value_or("sampled"));
  if (raw.seed) {
    const SeedChoice seed = parse_seed("check", *raw.seed);
    s.campaign.seed = seed.seed;
    s.report.seed_source = seed.source;
  }
  if (raw.cases) s.campaign.cases = parse_count("check", "--cases", *raw.cases, kMaxCases);
  if (raw.time_budget) {
    s.time_budget_seconds = parse_duration_seconds("check", *raw.time_budget);
    s.report.time_budget = *raw.time_budget;
    if (!raw.cases) s.campaign.cases = properties::kUnboundedCases;
  }
  if (raw.jobs) s.campaign.jobs = parse_jobs("check", *raw.jobs);
  if (raw.shard) s.campaign.shard = parse_shard("check", *raw.shard);
  s.campaign.self_check = raw.self_check;
  apply_profile(raw, s);
  s.format = parse_format("check", raw.format.value_or("human"));
  for (const std::string& file : raw.reports) s.reports.push_back(parse_report_file("check", file));
  if (raw.no_corpus && raw.corpus_dir) {
    throw UsageError("check: --no-corpus and --corpus-dir contradict each other");
  }
  if (raw.corpus_dir) {
    if (raw.corpus_dir->empty()) throw UsageError("check: --corpus-dir must not be empty");
    s.corpus_dir = *raw.corpus_dir;
  }
  s.save_corpus = !raw.no_corpus;
  if (s.save_corpus) check_writable_dir("check", "--corpus-dir", s.corpus_dir);
  s.before_after = raw.before_after;
  if (s.before_after && s.format != OutputFormat::human) {
    throw UsageError("check: --before-after needs --format human");
  }
  s.campaign.keep_blocks = s.campaign.shard.count > 1;
  s.report.seed = s.campaign.seed;
  if (s.campaign.cases != properties::kUnboundedCases) s.report.case_budget = s.campaign.cases;
  s.report.shards = {s.campaign.shard.count, {s.campaign.shard.index}};
  s.report.self_check = s.campaign.self_check;
  settle_sut(raw, s);
  return s;
}

// --sut: the step runs in another process; what only our own step has
// (mutants, the self-check's reruns, the before/after table) does not apply.
void settle_sut(const RawOptions& raw, CheckSettings& s) {
  if (!raw.sut) {
    if (raw.sut_timeout) throw UsageError("check: --sut-timeout needs --sut CMD");
    if (!raw.restrict.empty()) throw UsageError("check: --restrict needs --sut CMD");
    return;
  }
  s.report.restrict_options = raw.restrict;
  s.sut = parse_sut("check", raw.sut, raw.sut_timeout);
  if (raw.mutant) throw UsageError("check: --mutant changes the harness's own step, not a --sut");
  if (raw.self_check) {
    throw UsageError(
        "check: --self-check reruns the harness's own step; it does not apply to --sut");
  }
  if (s.before_after)
    throw UsageError("check: --before-after shows the harness's own step, not --sut");
  s.campaign.self_check = false;  // --profile explore's
  s.report.self_check = false;
  s.report.sut_command = s.sut->command;
  s.report.sut_timeout = s.sut->timeout_text;
}

// Ctrl-C ends the campaign at a case boundary with a report of what ran; a
// second one kills the process as usual.
volatile sig_atomic_t interrupted = 0;

void on_interrupt(int) {
  interrupted = 1;
}

void catch_interrupt() {
  struct sigaction action {};
  action.sa_handler = on_interrupt;
  action.sa_flags = SA_RESETHAND;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
}

// "1:02:03" or "2:03".
std::string clock_text(double seconds) {
  const auto total = static_cast<std::int64_t>(seconds + 0.5);
  char text[32];
  if (total >= 3600) {
    std::snprintf(text, sizeof text, "%lld:%02lld:%02lld", static_cast<long long>(total / 3600),
                  static_cast<long long>(total / 60 % 60), static_cast<long long>(total % 60));
  } else {
    std::snprintf(text, sizeof text, "%lld:%02lld", static_cast<long long>(total / 60),
                  static_cast<long long>(total % 60));
  }
  return text;
}

// The progress line: stderr, only on a terminal and outside CI (the CI variable set), at most
// ~5 times a second; a bar when the campaign has a case budget. It reads the campaign's
// progress and writes nothing else: the results are the same with or without it.
class Progress {
 public:
  Progress(std::ostream& err, const CheckSettings& s)
      : err_(err),
        enabled_(::isatty(STDERR_FILENO) == 1 && std::getenv("CI") == nullptr),
        start_(Clock::now()),
        cases_(s.campaign.cases),
        time_budget_(s.time_budget_seconds) {}

  void update(const properties::CampaignProgress& p) {
    if (!enabled_) return;
    const auto now = Clock::now();
    if (now - last_ < std::chrono::milliseconds(200)) return;
    last_ = now;
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    const double rate = elapsed > 0 ? static_cast<double>(p.cases_done) / elapsed : 0;
    std::optional<double> eta;
    if (cases_ != properties::kUnboundedCases && rate > 0) {
      eta = static_cast<double>(cases_ - p.cases_done) / rate;
    }
    if (time_budget_) eta = std::min(eta.value_or(*time_budget_), *time_budget_ - elapsed);
    std::string bar;
    if (cases_ != properties::kUnboundedCases && cases_ > 0) {
      const auto filled =
          static_cast<std::size_t>(std::clamp<std::int64_t>(p.cases_done * 20 / cases_, 0, 20));
      bar = "[" + std::string(filled, '#') + std::string(20 - filled, '.') + "] ";
    }
    char line[200];
    std::snprintf(line, sizeof line,
                  "\r\x1b[Kcheck: %s%lld cases, %d failure%s, %.0f cases/s, ETA %s", bar.c_str(),
                  static_cast<long long>(p.cases_done), p.failure_index ? 1 : 0,
                  p.failure_index ? " (finishing the cases before it)" : "s", rate,
                  eta ? clock_text(std::max(0.0, *eta)).c_str() : "?");
    err_ << line << std::flush;
    shown_ = true;
  }

  void finish() {
    if (shown_) err_ << "\r\x1b[K" << std::flush;
  }

 private:
  std::ostream& err_;
  bool enabled_;
  Clock::time_point start_, last_{};
  std::int64_t cases_;
  std::optional<double> time_budget_;
  bool shown_ = false;
};

// The seed's table, for representative cases: before and after the fix.
void print_representative_before_after(std::ostream& out) {
  struct Mesh {
    std::int32_t world, dp;
    bool use_batch;
  };
  std::vector<BeforeAfterRow> rows;
  for (const Mesh mesh :
       {Mesh{2, 2, true}, {4, 2, true}, {4, 4, true}, {8, 4, true}, {4, 2, false}}) {
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
    for (const bool compensate : {false, true}) {
      c.compensate = compensate;
      step::CaseReport report = step::run_case(c, nullptr, {});
      const std::string note = mesh.use_batch ? "" : ddp_objective_note(report);
      rows.push_back(
          {label + (compensate ? "with the fix" : "before the fix"), std::move(report), note});
    }
  }
  out << "\nbefore/after the fix (2 micro-steps, 2 groups per rank, qq + masking):\n";
  print_before_after(out, rows);
}

properties::CampaignResult run(CheckSettings& s, std::ostream& err) {
  Progress progress(err, s);
  s.campaign.on_progress = [&](const properties::CampaignProgress& p) { progress.update(p); };
  std::optional<Clock::time_point> deadline;
  if (s.time_budget_seconds) {
    deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                  std::chrono::duration<double>(*s.time_budget_seconds));
  }
  s.campaign.stop_requested = [deadline] {
    return interrupted != 0 || (deadline && Clock::now() >= *deadline);
  };
  catch_interrupt();
  properties::CampaignResult result = properties::run_campaign(s.campaign);
  progress.finish();
  if (interrupted != 0 && result.stopped_by == properties::StopReason::time) {
    result.stopped_by = properties::StopReason::interrupted;
  }
  return result;
}

void print(std::ostream& out, const CheckSettings& s, const properties::CampaignReport& report) {
  print_report(out, s.format, report);
  if (s.format == OutputFormat::human && s.before_after && report.passed()) {
    print_representative_before_after(out);
  }
}

// `--backend fiber|mpi`: `check --backend mpi` is `check-mpi` (the campaign
// sharded over the processes of an MPI job); fiber is the default. Returns
// the arguments without the option and whether MPI was asked for.
std::pair<std::vector<std::string>, bool> take_backend(std::span<const std::string> args) {
  std::vector<std::string> rest;
  bool mpi = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string value;
    if (args[i] == "--backend") {
      if (i + 1 == args.size()) throw UsageError("check: --backend needs a value: fiber or mpi");
      value = args[++i];
    } else if (args[i].starts_with("--backend=")) {
      value = args[i].substr(std::string("--backend=").size());
    } else {
      rest.push_back(args[i]);
      continue;
    }
    if (value != "fiber" && value != "mpi") {
      throw UsageError("check: --backend must be fiber or mpi, not '" + value + "'");
    }
    mpi = value == "mpi";
  }
  return {rest, mpi};
}

int run_check_on_fibers(const CommandContext& context);

// One family's rows of the strategy campaign's table (points with cases only).
void print_strategy_cells(std::ostream& out, const char* family,
                          const std::array<properties::StrategyCell, step::kPointCount>& cells) {
  std::int64_t cases = 0;
  for (const properties::StrategyCell& cell : cells) cases += cell.cases;
  if (cases == 0) return;
  char line[320];
  std::snprintf(line, sizeof line, "%-48s %6s %5s %5s %8s %6s %8s %6s %6s %8s %9s %9s\n", "point",
                "cases", "disc", "f32m", "correct", "ratio", "counter", "no-cex", "other",
                "mismatch", "direct ok", "direct n1");
  out << line;
  const auto all = step::all_strategies();
  for (std::size_t i = 0; i < all.size(); ++i) {
    const properties::StrategyCell& cell = cells[i];
    if (cell.cases == 0) continue;
    const auto n = [](std::int64_t v) { return static_cast<long long>(v); };
    const std::string point = std::string(family) + " " + step::name_of(all[i]);
    std::snprintf(line, sizeof line,
                  "%-48s %6lld %5lld %5lld %8lld %6lld %8lld %6lld %6lld %8lld %9lld %9lld\n",
                  point.c_str(), n(cell.cases), n(cell.discarded), n(cell.near_ties),
                  n(cell.correct), n(cell.ratio), n(cell.counterexamples),
                  n(cell.no_counterexample), n(cell.no_counterexample_other), n(cell.mismatched),
                  n(cell.direct_confirmed), n(cell.direct_one_number));
    out << line;
    // Every case discarded: say why, or the row looks like a pass.
    if (cell.discarded == cell.cases)
      out << "  all discarded; first: " << cell.first_discard << "\n";
  }
}

// --strategies with --sut: the SUT's session, and `options` narrowed to what
// its handshake supports. A SUT that does not take the "strategy" key runs
// its own point: the one point named must be that point.
std::unique_ptr<sut::Session> strategy_sut(const RawOptions& raw,
                                           properties::StrategyCampaignOptions& options) {
  if (raw.jobs) throw UsageError("check: --jobs does not apply to --strategies (one SUT process)");
  const SutChoice choice = parse_sut("check", raw.sut, raw.sut_timeout);
  auto session = std::make_unique<sut::Session>(choice.command, choice.timeout_seconds);
  const sut::Supports& supports = session->handshake().supports;
  if (!options.only && !supports.declares("strategy")) {
    throw UsageError(
        "check: --strategies all needs a SUT that declares the \"strategy\" extension key; this "
        "one runs its own point: name it, e.g. --strategies detached-own-live/global/scale-1/mean");
  }
  using properties::FamilyChoice;
  const bool ntxent = options.families == FamilyChoice::ntxent;
  const bool siglip = options.families == FamilyChoice::siglip;
  const bool infonce =
      supports.infonce_family && options.families != FamilyChoice::clip && !ntxent && !siglip;
  const bool clip = supports.clip_family && supports.declares("family") &&
                    options.families != FamilyChoice::infonce && !ntxent && !siglip;
  if (ntxent && !(supports.ntxent_family && supports.declares("family"))) {
    throw UsageError("check: --family ntxent, but the SUT's handshake has no ntxent family");
  }
  if (siglip && !(supports.siglip_family && supports.declares("family"))) {
    throw UsageError("check: --family siglip, but the SUT's handshake has no siglip family");
  }
  if (!infonce && !clip && !ntxent && !siglip) {
    throw UsageError("check: the SUT runs none of the loss families --family asks for");
  }
  options.families = ntxent            ? FamilyChoice::ntxent
                     : siglip          ? FamilyChoice::siglip
                     : infonce && clip ? FamilyChoice::both
                     : clip            ? FamilyChoice::clip
                                       : FamilyChoice::infonce;
  options.limits.restriction = properties::restriction_of(supports);
  // The strategy campaign draws each case's family itself.
  options.limits.restriction.infonce = true;
  options.limits.restriction.clip = false;
  options.limits.restriction.ntxent = false;
  options.limits.restriction.siglip = false;
  for (const std::string& text : raw.restrict) {
    apply_restrict_option("check", text, options.limits.restriction);
  }
  options.equal_batches_only = !supports.unequal_batches;
  options.learnable_temperature = supports.declares("learnable_temperature");
  const sut::Supports copy = supports;
  // The strategy key of a SUT that runs its own point is the judge's, not sent.
  options.skip = [copy](const Case& c) {
    if (copy.declares("strategy")) return sut::outside_supports(c, copy);
    Case sent = c;
    sent.strategy.reset();
    return sut::outside_supports(sent, copy);
  };
  sut::Session* channel = session.get();
  options.runner = [channel](const Case& c, const step::ReferenceValues& reference) {
    return properties::run_on_sut(*channel, c, reference);
  };
  return session;
}

// --strategies --oracle every|off: whether oracle/ judges every case's
// reference (default every: the strategy campaign is where the oracle sees the
// CLIP family and learnable temperatures).
bool strategy_oracle(const RawOptions& raw) {
  const properties::OracleMode mode = parse_oracle("check", raw.oracle.value_or("every"));
  if (mode == properties::OracleMode::sampled) {
    throw UsageError("check: --strategies takes --oracle every or off (no sample: every case)");
  }
  return mode == properties::OracleMode::every;
}

// --strategies: the strategy campaign (properties/strategy_campaign.hpp).
// The seed, the case budget (or one case), the generator distribution, the
// output format, report files and where mismatching cases are saved apply.
void reject_for_strategies(const RawOptions& raw) {
  const auto reject = [](bool given, const char* option) {
    if (given)
      throw UsageError(std::string("check: ") + option + " does not apply to --strategies");
  };
  reject(raw.time_budget.has_value(), "--time-budget");
  reject(raw.jobs.has_value(), "--jobs");
  reject(raw.shard.has_value(), "--shard");
  if (raw.profile && *raw.profile != "ci") {
    throw UsageError(
        "check: --strategies takes --profile ci only (seed 1, 4000 cases, the oracle)");
  }
  reject(raw.mutant.has_value(), "--mutant");
  reject(raw.before_after, "--before-after");
  reject(raw.self_check, "--self-check");
  if (raw.sut_timeout && !raw.sut) throw UsageError("check: --sut-timeout needs --sut CMD");
  if (raw.no_corpus && raw.corpus_dir) {
    throw UsageError("check: --no-corpus and --corpus-dir contradict each other");
  }
  for (const std::string& file : raw.reports) {
    if (parse_report_file("check", file).kind != ReportKind::json &&
        parse_report_file("check", file).kind != ReportKind::junit) {
      throw UsageError("check: --strategies writes .json or .xml reports, not '" + file + "'");
    }
  }
}

// The first case of each cause of mismatch, shrunk while it mismatches for
// that cause, and saved (with its strategy key) unless `dir` is unset.
std::vector<StrategyReport::Shrunk> shrink_strategy_mismatches(
    const properties::StrategyCampaignOptions& o, const properties::StrategyCampaignResult& r,
    const std::optional<std::filesystem::path>& dir) {
  constexpr std::int32_t kShrinkEvaluations = 300;
  std::vector<StrategyReport::Shrunk> out;
  for (const auto& [cause, group] : r.mismatches_by_cause) {
    properties::StrategyShrunk shrunk =
        properties::shrink_strategy_mismatch(o, group.indices.front(), cause, kShrinkEvaluations);
    StrategyReport::Shrunk entry{cause, shrunk.shrunk_text, shrunk.result.detail,
                                 shrunk.shrink_steps, ""};
    if (dir) {
      Finding found;
      found.property = "strategy-point";  // the cause is in the report
      found.seed = o.seed;
      found.case_index = group.indices.front();
      shrunk.shrunk_case.found = found;
      entry.saved = save_corpus_case(shrunk.shrunk_case, *dir).string();
    }
    out.push_back(std::move(entry));
  }
  return out;
}

// A saved case file (its strategy key set) as the campaign judges a case.
properties::StrategyCampaignResult run_strategy_file(
    const properties::StrategyCampaignOptions& options, const std::string& path) {
  Case c = read_case_file(path);
  if (!c.strategy) throw UsageError("check: --case " + path + " has no \"strategy\" key");
  if (options.only) c.strategy = *options.only;  // the point it is judged at
  properties::StrategyCampaignResult result;
  properties::StrategyCaseResult r;
  if (const auto reason = options.skip ? options.skip(c) : std::nullopt) {
    r.strategy = *c.strategy;
    r.detail = "outside the step's supports: " + *reason;
  } else {
    r = properties::check_strategy_case(c, options.runner, options.oracle);
  }
  properties::tally_strategy_case(0, c, r, result);
  return result;
}

// One case of the campaign alone: its line, exit 1 when it mismatches.
properties::StrategyCampaignResult run_one_strategy_case(
    const properties::StrategyCampaignOptions& options, std::int64_t index) {
  properties::StrategyCampaignOptions one = options;
  one.first_case = index;
  one.cases = index + 1;
  return properties::run_strategy_campaign(one);
}

void print_strategy_human(std::ostream& out, const StrategyReport& report,
                          const std::string& limits) {
  const properties::StrategyCampaignResult& result = report.result;
  out << "strategy campaign: seed " << report.seed << ", " << result.cases << " cases, limits "
      << limits << ", each case's loss and gradients against the rank program at its point "
      << "and prediction/'s derivation\n";
  out << "oracle: " << (report.oracle ? "judged the reference of " : "off (--oracle off); ")
      << (report.oracle
              ? std::to_string(result.oracle_judged()) + " cases (CLIP, NT-Xent, SigLIP " +
                    std::to_string(result.oracle_judged_clip()) + ")"
              : std::string("the reference is not judged"))
      << "\n";
  if (report.sut_name) {
    out << "step: the SUT " << *report.sut_name << "\n";
    for (const std::string& axis : report.restricted_axes) out << "restricted: " << axis << "\n";
  }
  print_strategy_cells(out, "infonce", result.cells);
  print_strategy_cells(out, "clip", result.clip_cells);
  print_strategy_cells(out, "ntxent", result.ntxent_cells);
  print_strategy_cells(out, "siglip", result.siglip_cells);
  out << "correct / ratio / counter: cases where the prediction (correct; an exact ratio r != 1; "
         "no single ratio) held: the gradient is the reference, r x the reference, or no "
         "multiple of it (a counterexample)\n";
  out << "no-cex: predicted no single ratio, but this case's gradient is a multiple of the "
         "reference (skipped, not passed); other: of those, the ones neither a zero reference, nor "
         "D x F = 1, nor a DP shard without a group explains; disc: the reference rejects the "
         "case (or the SUT declined it, or it lies outside the SUT's handshake); f32m: "
         "not judged, a float32 local loss with the fake-negative mask (near ties), or, with "
         "--sut, a case unlike the point's rank program only within rounding of a mask tie\n";
  out << "direct ok: cases with direct parameters (InfoNCE: a learnable 1/T on every other case; "
         "CLIP: the log logit scale, and the bias where set) whose gradients are the predicted r x "
         "the reference's (r = 1: correct); direct n1: predicted no single ratio (unequal "
         "batches), not judged: one number is a multiple of any other\n";
  if (report.sut_name) {
    out << "mismatch: with --sut, also every case whose loss (every rank's) or gradient (both "
           "parameter groups) is not the rank program's at the point, within tolerance\n";
  }
  if (report.passed()) {
    out << "PASS: every observed outcome is the predicted one (" << result.cases << " cases)\n";
    return;
  }
  print_strategy_mismatches(out, report);
}

// --strategies with --family all: the grid of every family x the points
// named (properties/strategy_grid.hpp); the seed, the case budget (split
// evenly over the cells), --jobs, --limits and --oracle apply.
int run_strategy_grid_check(const RawOptions& raw, const CommandContext& context) {
  const auto reject = [](bool given, const char* option) {
    if (given) {
      throw UsageError(std::string("check: ") + option +
                       " does not apply to --family all (run the cell's point and family)");
    }
  };
  reject(raw.time_budget.has_value(), "--time-budget");
  reject(raw.shard.has_value(), "--shard");
  reject(raw.profile.has_value(), "--profile");
  reject(raw.mutant.has_value(), "--mutant");
  reject(raw.before_after, "--before-after");
  reject(raw.self_check, "--self-check");
  reject(raw.sut.has_value() || raw.sut_timeout.has_value() || !raw.restrict.empty(), "--sut");
  reject(raw.case_index.has_value(), "--case-index");
  reject(raw.case_file.has_value(), "--case");
  reject(raw.corpus_dir.has_value(), "--corpus-dir");
  reject(!raw.reports.empty(), "--report");
  if (raw.format && *raw.format != "human") {
    throw UsageError("check: --family all prints its table only (--format human)");
  }
  StrategyGridReport report;
  report.program = std::string(context.program);
  report.limits = raw.limits.value_or("default");
  properties::StrategyGridOptions& options = report.options;
  try {
    if (const auto point = properties::parse_strategy_choice(*raw.strategies)) {
      options.points = {*point};
    }
  } catch (const InputError& e) {
    throw UsageError(std::string("check: ") + e.what());
  }
  options.limits = parse_limits("check", report.limits);
  if (raw.seed) options.seed = parse_seed("check", *raw.seed).seed;
  if (raw.cases) options.cases = parse_count("check", "--cases", *raw.cases, kMaxCases);
  if (raw.jobs) options.jobs = parse_jobs("check", *raw.jobs);
  options.oracle = strategy_oracle(raw);
  report.result = properties::run_strategy_grid(options);
  print_strategy_grid(context.out, report);
  return report.result.cells_not_as_predicted() == 0 ? kExitOk : kExitCheckFailed;
}

int run_strategy_check(const RawOptions& raw, const CommandContext& context) {
  if (raw.family && *raw.family == "all") return run_strategy_grid_check(raw, context);
  reject_for_strategies(raw);
  properties::StrategyCampaignOptions options;
  try {
    options.only = properties::parse_strategy_choice(*raw.strategies);
    if (raw.family) options.families = properties::parse_family_choice(*raw.family);
  } catch (const InputError& e) {
    throw UsageError(std::string("check: ") + e.what());
  }
  const std::string limits = raw.limits.value_or("default");
  options.limits = parse_limits("check", limits);
  if (raw.seed) options.seed = parse_seed("check", *raw.seed).seed;
  options.cases = raw.cases     ? parse_count("check", "--cases", *raw.cases, kMaxCases)
                  : raw.profile ? kCiStrategyCases
                                : 3600;
  options.oracle = strategy_oracle(raw);
  const OutputFormat format = parse_format("check", raw.format.value_or("human"));
  if (raw.corpus_dir) check_writable_dir("check", "--corpus-dir", *raw.corpus_dir);
  if (raw.case_file && raw.case_index) {
    throw UsageError("check: --case FILE and --case-index I contradict each other");
  }
  StrategyReport report;
  report.program = std::string(context.program);
  report.seed = options.seed;
  report.limits = limits;
  report.point = *raw.strategies;
  report.family = raw.family.value_or("both");
  report.oracle = options.oracle;
  std::unique_ptr<sut::Session> session;
  if (raw.sut) {
    session = strategy_sut(raw, options);
    report.sut_command = *raw.sut;
    report.sut_timeout = raw.sut_timeout;
    report.sut_name =
        session->handshake().name +
        (session->handshake().supports.declares("strategy")
             ? " (runs the point each case names)"
             : " (runs its own point; each case is judged at " + *raw.strategies + ")");
    report.restrict_options = raw.restrict;
    report.restricted_axes =
        properties::restricted_axes(options.limits.restriction, parse_limits("check", limits));
  } else if (!raw.restrict.empty()) {
    throw UsageError("check: --restrict without --sut does not apply to --strategies");
  }
  if (raw.case_file) {
    report.result = run_strategy_file(options, *raw.case_file);
  } else if (raw.case_index) {
    const std::int64_t index = parse_count("check", "--case-index", *raw.case_index, kMaxCases);
    report.result = run_one_strategy_case(options, index);
  } else {
    report.result = properties::run_strategy_campaign(options);
    std::optional<std::filesystem::path> dir;
    if (!raw.no_corpus) dir = raw.corpus_dir.value_or(properties::kDefaultCorpusFoundDir);
    if (!report.passed()) report.shrunk = shrink_strategy_mismatches(options, report.result, dir);
  }
  report.cases = report.result.cases;
  if (format == OutputFormat::json) context.out << strategy_report_json(report);
  if (format == OutputFormat::junit) context.out << strategy_report_junit(report);
  if (format == OutputFormat::human) print_strategy_human(context.out, report, limits);
  for (const std::string& file : raw.reports) {
    const ReportFile target = parse_report_file("check", file);
    write_text_file_atomically(target.path, target.kind == ReportKind::json
                                                ? strategy_report_json(report)
                                                : strategy_report_junit(report));
  }
  return report.passed() ? kExitOk : kExitCheckFailed;
}

int run_check(const CommandContext& context) {
  const auto [args, mpi] = take_backend(context.args);
  const std::vector<std::string> name{"check-mpi"};
  const auto match = mpi ? match_command(name) : std::nullopt;
  const Command& command = match ? *match->command : context.command;
  const CommandContext forwarded{command,         args, context.out, context.err, context.program,
                                 context.describe};
  return match ? command.run(forwarded) : run_check_on_fibers(forwarded);
}

int run_check_on_fibers(const CommandContext& context) {
  RawOptions raw;
  const auto values = parse_command_options(context, check_options(raw));
  if (!values) return kExitOk;
  take_all(*values, raw);
  if (raw.family && !raw.strategies)
    throw UsageError("check: --family applies only with --strategies");
  if ((raw.case_index || raw.case_file) && !raw.strategies) {
    throw UsageError(
        "check: --case-index and --case apply only with --strategies (replay replays a case "
        "of the property campaign)");
  }
  if (raw.strategies) return run_strategy_check(raw, context);
  CheckSettings s = settle(raw);
  // The SUT processes live as long as the campaign (and its shrinking).
  std::unique_ptr<properties::SutStep> sut;
  if (s.sut) {
    sut = start_sut(*s.sut, s.campaign.jobs);
    s.campaign.external = sut.get();
    s.campaign.limits.restriction = sut->restriction();
    for (const std::string& option : s.report.restrict_options) {
      apply_restrict_option("check", option, s.campaign.limits.restriction);
    }
    s.report.sut_name = sut->handshake().name;
    s.report.restricted_axes = properties::restricted_axes(s.campaign.limits.restriction,
                                                           parse_limits("check", s.report.limits));
    for (std::string& note : properties::handshake_notes(sut->handshake().supports)) {
      s.report.restricted_axes.push_back(std::move(note));
    }
  }
  properties::CampaignReport report = s.report;
  report.program = std::string(context.program);
  report.result = run(s, context.err);
  record_failure(s, report);
  print(context.out, s, report);
  for (const ReportFile& file : s.reports) write_report_file(file, report);
  if (!report.passed()) return kExitCheckFailed;
  // A partial campaign is not a pass: the shell's code for an interrupt.
  return report.result.stopped_by == properties::StopReason::interrupted ? kExitInterrupted
                                                                         : kExitOk;
}

const RegisterCommand kCheck{
    {"check",
     "[--seed SEED] [--cases K] [--time-budget 10m] [--jobs N] [--shard I/N] [--profile "
     "ci|explore] "
     "[--mutant NAME] [--strategies all|POINT [--family both|infonce|clip|ntxent|siglip|all] "
     "[--sut CMD]] "
     "[--format "
     "human|json|junit] [--report FILE]... [--self-check] "
     "[--before-after] [--backend fiber|mpi] [--sut CMD [--sut-timeout S]]",
     "run the property campaign; shrink, save and print a reproducer on failure", run_check}};

}  // namespace
}  // namespace infonce::cli
