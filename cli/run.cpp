// `infonce-sim run --case FILE [--json] [--schedule-seed N] [--mutant NAME]
// [--backend fiber|mpi]`: the case's data-parallel step on the simulator (or,
// under `mpirun -np W ... --backend mpi`, one MPI process per world rank)
// against the full-batch reference (docs/MODEL.md section 8). Both backends
// print the same bytes. The verdict lists each check (gradient, loss,
// padding, expect) with its own result. Exit 0 every check passed, 1 one
// failed, 2 bad input, 3 simulation error.
#include <optional>
#include <ostream>
#include <string>

#include "casefile/case_json.hpp"
#include "cli/case_report.hpp"
#include "cli/command.hpp"
#include "cli/mpi_support.hpp"
#include "step/mutants.hpp"
#include "step/run_case.hpp"

#if INFONCE_HAVE_MPI
#include "step/mpi/run_on_mpi.hpp"
#endif

namespace infonce::cli {
namespace {
namespace po = boost::program_options;

const step::Mutant* mutant_named(const std::string& name) {
  if (name.empty()) return nullptr;
  const step::Mutant* mutant = step::find_mutant(name);
  if (mutant == nullptr) {
    throw UsageError("run: unknown --mutant '" + name + "' (see `infonce-sim mutants`)");
  }
  return mutant;
}

// The case with compensation flipped: the other row of the before/after table.
Case flipped_case(const Case& c) {
  Case other = c;
  other.compensate = !c.compensate;
  return other;
}

void print_human(std::ostream& out, const std::string& path, const Case& c,
                 const step::CaseReport& report, const step::CaseReport& flipped,
                 const step::Mutant* mutant) {
  out << "case        " << path << "\nmesh        world " << c.mesh.world << ", dp " << c.mesh.dp
      << ", use_batch " << (c.loss.use_batch ? "true" : "false") << ", reduction "
      << (c.reduction == Reduction::mean ? "mean" : "sum") << "\n";
  if (mutant != nullptr) out << "mutant      " << mutant->name << "\n";
  out << "\n";
  const step::CaseReport& before = c.compensate ? flipped : report;
  const step::CaseReport& after = c.compensate ? report : flipped;
  const std::string note = c.loss.use_batch ? "" : ddp_objective_note(report);
  print_before_after(out, {{"before the fix (compensate: false)", before, note},
                           {"with the fix (compensate: true)", after, note}});
  out << "\nchecks of the case as it asks (compensate: " << (c.compensate ? "true" : "false")
      << "):\n";
  print_checks(out, case_checks(c, report));
}

struct RunRequest {
  std::string case_path;
  std::string mutant_name;
  bool json = false;
  std::optional<std::uint64_t> schedule_seed;
  bool mpi_allreduce = false;
  double stall_timeout = 300;
};

// Prints the report (JSON or the human table) and returns the exit code.
int report_case(std::ostream& out, const RunRequest& request, const Case& c,
                const step::CaseReport& report, const step::CaseReport* flipped,
                const step::Mutant* mutant) {
  if (request.json) {
    print_json_line(out, case_report_json(c, report));
  } else {
    print_human(out, request.case_path, c, report, *flipped, mutant);
  }
  return checks_pass(case_checks(c, report)) ? kExitOk : kExitCheckFailed;
}

int run_on_fibers(const CommandContext& context, const RunRequest& request) {
  const step::Mutant* mutant = mutant_named(request.mutant_name);
  const Case c = read_case_file(request.case_path);
  step::RunOptions run_options;
  if (request.schedule_seed) {
    run_options.schedule = {sim::ScheduleKind::random, *request.schedule_seed};
  }
  const step::CaseReport report = step::run_case(c, mutant, run_options);
  std::optional<step::CaseReport> flipped;
  if (!request.json) flipped = step::run_case(flipped_case(c), mutant, run_options);
  return report_case(context.out, request, c, report, flipped ? &*flipped : nullptr, mutant);
}

#if INFONCE_HAVE_MPI
// One process per world rank; world rank 0 prints what the fiber path prints.
int run_on_mpi(const CommandContext& context, const RunRequest& request) {
  sim::MpiOptions mpi_options;
  mpi_options.reduction =
      request.mpi_allreduce ? sim::MpiReduction::native : sim::MpiReduction::ordered;
  mpi_options.stall_timeout_seconds = request.stall_timeout;
  const step::Mutant* mutant = nullptr;
  Case c;
  const auto setup = [&](sim::MpiCommunicator& comm) {
    mutant = mutant_named(request.mutant_name);
    c = read_case_file(request.case_path);
    step::check_world_matches(c, comm);
  };
  const auto body = [&](sim::MpiCommunicator& comm, std::ostream& out) {
    const std::optional<step::CaseReport> report = step::run_case_on_mpi(c, mutant, comm);
    std::optional<step::CaseReport> flipped;
    if (!request.json) flipped = step::run_case_on_mpi(flipped_case(c), mutant, comm);
    if (!report) return kExitOk;  // not world rank 0: rank 0's code is the job's
    return report_case(out, request, c, *report, flipped ? &*flipped : nullptr, mutant);
  };
  return run_mpi_job(context, mpi_options, setup, body);
}
#endif

int run_run(const CommandContext& context) {
  RunRequest request;
  std::uint64_t schedule_seed = 0;
  std::string backend = "fiber";
  po::options_description options("options");
  options.add_options()("case", po::value(&request.case_path)->value_name("FILE"), "the case file")(
      "json", po::bool_switch(&request.json), "print the result as JSON (docs/MODEL.md section 8)")(
      "schedule-seed", po::value(&schedule_seed)->value_name("N"),
      "random fiber interleaving with this seed (default: FIFO)")(
      "mutant", po::value(&request.mutant_name)->value_name("NAME"), "run a known-wrong variant")(
      "backend", po::value(&backend)->value_name("fiber|mpi"),
      "fiber (default): every rank on the simulator in this process; mpi: one process per "
      "world rank, under `mpirun -np <mesh.world>`")(
      "mpi-allreduce", po::bool_switch(&request.mpi_allreduce),
      "mpi: reduce gradients with MPI_Allreduce (order unspecified: within tolerance of the "
      "fiber result, not bit-identical); default: gather and sum in rank order, as the fibers")(
      "stall-timeout", po::value(&request.stall_timeout)->value_name("SECONDS"),
      "mpi: a collective whose members have not all arrived after this long is an error "
      "(default 300; 0: wait forever)");
  const auto values = parse_command_options(context, options);
  if (!values) return kExitOk;
  require_option(context, *values, "case", "FILE");
  if (values->count("schedule-seed")) request.schedule_seed = schedule_seed;
  if (backend == "fiber") {
    if (request.mpi_allreduce || values->count("stall-timeout")) {
      throw UsageError("run: --mpi-allreduce and --stall-timeout need --backend mpi");
    }
    return run_on_fibers(context, request);
  }
  if (backend != "mpi") {
    throw UsageError("run: unknown --backend '" + backend + "' (fiber or mpi)");
  }
  if (request.schedule_seed) {
    throw UsageError("run: --schedule-seed is for --backend fiber (MPI has no fiber schedule)");
  }
  if (!(request.stall_timeout >= 0)) {
    throw UsageError("run: --stall-timeout must be >= 0 seconds");
  }
#if INFONCE_HAVE_MPI
  return run_on_mpi(context, request);
#else
  throw UsageError("run: --backend mpi: this infonce-sim was built without MPI (INFONCE_MPI=OFF)");
#endif
}

const RegisterCommand kRun{
    {"run",
     "--case FILE [--json] [--schedule-seed N] [--mutant NAME] [--backend fiber|mpi] "
     "[--mpi-allreduce] [--stall-timeout SECONDS]",
     "run a case's data-parallel step on the simulator (or MPI) and compare with the reference",
     run_run}};

}  // namespace
}  // namespace infonce::cli
