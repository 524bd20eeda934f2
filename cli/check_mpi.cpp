// `mpirun -np N infonce-sim check-mpi [--seed SEED] [--cases K] [--time-budget
// 10m] [--jobs J] [--mutant NAME] [--limits default|typical] [--self-check]
// [--format human|json|junit] [--report FILE]... [--corpus-dir DIR |
// --no-corpus]`: the property campaign of `check`, sharded over the N
// processes of an MPI job. Process i runs `check --shard i/N` (disjoint
// blocks of cases); world rank 0 gathers the N reports over MPI, merges them
// as `infonce-sim merge` does, saves the failure (if any) to the corpus and
// prints one report: with a case budget, the same bytes as the single-process
// `check` with the same options. Exit 0 pass, 1 failure, 2 bad input.
#include <chrono>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "cli/mpi_support.hpp"
#include "cli/tool_options.hpp"
#include "properties/campaign.hpp"
#include "properties/campaign_report.hpp"

namespace infonce::cli {
namespace {
namespace po = boost::program_options;

constexpr std::int64_t kMaxCases = 1'000'000'000'000;

struct RawOptions {
  std::string seed, cases, time_budget, jobs, mutant, limits = "default", format = "human";
  std::string corpus_dir;
  std::vector<std::string> reports;
  bool no_corpus = false, self_check = false;
};

// Everything but the shard, which is the process's world rank.
using Settings = CampaignSettings;

po::options_description check_mpi_options(RawOptions& raw) {
  po::options_description options("options");
  options.add_options()("seed", po::value(&raw.seed)->value_name("SEED"),
                        "campaign seed: a number, 0xHEX, a git commit hash, or 'git' (default 1)")(
      "cases", po::value(&raw.cases)->value_name("K"),
      "case budget over all shards (default 1000; none with only --time-budget)")(
      "time-budget", po::value(&raw.time_budget)->value_name("DURATION"),
      "every shard stops after this long, e.g. 10m (the report says which cases ran)")(
      "jobs,j", po::value(&raw.jobs)->value_name("N"),
      "worker threads per process, or 'auto' (default 1; results do not depend on it)")(
      "mutant", po::value(&raw.mutant)->value_name("NAME"), "check a known-wrong variant")(
      "limits", po::value(&raw.limits)->value_name("default|typical"), "generator distribution")(
      "self-check", po::bool_switch(&raw.self_check),
      "rerun every 16th case (generation, reference, the step with no shared losses and under "
      "another schedule) and compare every bit")(
      "format", po::value(&raw.format)->value_name("human|json|junit"),
      "what standard output gets (default human)")(
      "report", po::value(&raw.reports)->value_name("FILE"),
      "also write FILE: .json, .xml (JUnit), .svg or .html; repeatable")(
      "corpus-dir", po::value(&raw.corpus_dir)->value_name("DIR"),
      "where a shrunk failure is saved (default corpus/found, relative to the working directory)")(
      "no-corpus", po::bool_switch(&raw.no_corpus), "do not save the shrunk failure");
  return options;
}

// The same settings `check` derives from the same options.
Settings settle(const RawOptions& raw) {
  const std::string_view command = "check-mpi";
  Settings s;
  s.campaign.limits = parse_limits(command, raw.limits);
  s.report.limits = raw.limits;
  s.campaign.mutant = parse_mutant(command, raw.mutant);
  s.report.mutant = s.campaign.mutant ? std::string(s.campaign.mutant->name) : "";
  if (!raw.seed.empty()) {
    const SeedChoice seed = parse_seed(command, raw.seed);
    s.campaign.seed = seed.seed;
    s.report.seed_source = seed.source;
  }
  if (!raw.cases.empty()) s.campaign.cases = parse_count(command, "--cases", raw.cases, kMaxCases);
  if (!raw.time_budget.empty()) {
    s.time_budget_seconds = parse_duration_seconds(command, raw.time_budget);
    s.report.time_budget = raw.time_budget;
    if (raw.cases.empty()) s.campaign.cases = properties::kUnboundedCases;
  }
  if (!raw.jobs.empty()) s.campaign.jobs = parse_jobs(command, raw.jobs);
  s.campaign.self_check = raw.self_check;
  s.format = parse_format(command, raw.format);
  for (const std::string& file : raw.reports) s.reports.push_back(parse_report_file(command, file));
  if (!raw.corpus_dir.empty()) s.corpus_dir = raw.corpus_dir;
  if (raw.no_corpus && !raw.corpus_dir.empty()) {
    throw UsageError("check-mpi: --no-corpus and --corpus-dir contradict each other");
  }
  s.save_corpus = !raw.no_corpus;
  if (s.save_corpus) check_writable_dir(command, "--corpus-dir", s.corpus_dir);
  s.report.seed = s.campaign.seed;
  if (s.campaign.cases != properties::kUnboundedCases) s.report.case_budget = s.campaign.cases;
  s.report.self_check = s.campaign.self_check;
  return s;
}

#if INFONCE_HAVE_MPI

// Shard `index` of `count`, as `check --shard index/count` runs it.
properties::CampaignReport run_shard(const Settings& s, std::int64_t index, std::int64_t count) {
  properties::CampaignOptions campaign = s.campaign;
  campaign.shard = {index, count};
  campaign.keep_blocks = count > 1;  // merging needs the per-block records
  if (s.time_budget_seconds) {
    using Clock = std::chrono::steady_clock;
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(*s.time_budget_seconds));
    campaign.stop_requested = [deadline] { return Clock::now() >= deadline; };
  }
  properties::CampaignReport report = s.report;
  report.shards = {count, {index}};
  report.result = properties::run_campaign(campaign);
  return report;
}

// The shards' reports travel as their JSON (the format `merge` reads).
std::vector<properties::CampaignReport> gather_reports(sim::Communicator& comm,
                                                       const properties::CampaignReport& mine) {
  const std::string json = properties::report_to_json(mine);
  std::vector<properties::CampaignReport> reports;
  for (const auto& bytes :
       comm.all_gather_object(comm.world(), std::as_bytes(std::span(json.data(), json.size())))) {
    reports.push_back(properties::report_from_json(
        std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size())));
  }
  return reports;
}

int run_sharded(const CommandContext& context, const Settings& s) {
  sim::MpiOptions mpi_options;
  mpi_options.stall_timeout_seconds = 0;  // shards legitimately take different times
  const auto no_setup = [](sim::MpiCommunicator&) {};
  const auto body = [&](sim::MpiCommunicator& comm, std::ostream& out) {
    const properties::CampaignReport mine = run_shard(s, comm.world_rank(), comm.world_size());
    const std::vector<properties::CampaignReport> shards = gather_reports(comm, mine);
    if (comm.world_rank() != 0) return kExitOk;  // rank 0's code is the job's
    properties::CampaignReport merged =
        shards.size() == 1 ? shards.front() : properties::merge_reports(shards);
    merged.program = std::string(context.program);
    record_failure(s, merged);
    print_report(out, s.format, merged);
    for (const ReportFile& file : s.reports) write_report_file(file, merged);
    return merged.passed() ? kExitOk : kExitCheckFailed;
  };
  return run_mpi_job(context, mpi_options, no_setup, body);
}

#endif

int run_check_mpi(const CommandContext& context) {
  RawOptions raw;
  const auto values = parse_command_options(context, check_mpi_options(raw));
  if (!values) return kExitOk;
  const Settings settings = settle(raw);
#if INFONCE_HAVE_MPI
  return run_sharded(context, settings);
#else
  throw UsageError("check-mpi: this infonce-sim was built without MPI (INFONCE_MPI=OFF)");
#endif
}

const RegisterCommand kCheckMpi{
    {"check-mpi",
     "[--seed SEED] [--cases K] [--time-budget 10m] [--jobs N] [--mutant NAME] "
     "[--limits default|typical] [--self-check] [--format human|json|junit] [--report FILE]... "
     "[--corpus-dir DIR | --no-corpus]   (under mpirun -np N)",
     "the property campaign sharded over the processes of an MPI job, one merged report",
     run_check_mpi}};

}  // namespace
}  // namespace infonce::cli
