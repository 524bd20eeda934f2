// `infonce-sim run --case FILE [--json] [--schedule-seed N] [--mutant NAME]`:
// the case's data-parallel step on the simulator against the full-batch
// reference (SPEC section 8). Exit 0 pass, 1 mismatch or unmet expect, 2 bad input.
#include <ostream>
#include <string>

#include "casefile/case_json.hpp"
#include "cli/case_report.hpp"
#include "cli/command.hpp"
#include "step/mutants.hpp"
#include "step/run_case.hpp"

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

void print_human(std::ostream& out, const std::string& path, const Case& c,
                 const step::CaseReport& report, const step::RunOptions& options,
                 const step::Mutant* mutant) {
  out << "case        " << path << "\nmesh        world " << c.mesh.world << ", dp " << c.mesh.dp
      << ", use_batch " << (c.loss.use_batch ? "true" : "false") << ", reduction "
      << (c.reduction == Reduction::mean ? "mean" : "sum") << "\n";
  if (mutant != nullptr) out << "mutant      " << mutant->name << "\n";
  out << "\n";
  Case other = c;
  other.compensate = !c.compensate;
  const step::CaseReport flipped = step::run_case(other, mutant, options);
  const step::CaseReport& before = c.compensate ? flipped : report;
  const step::CaseReport& after = c.compensate ? report : flipped;
  print_before_after(out, {{"before the fix (compensate: false)", before},
                           {"with the fix (compensate: true)", after}});
  out << "\nthis case asks for compensate: " << (c.compensate ? "true" : "false") << " -> "
      << (report.pass ? "matches the reference" : "DIFFERS from the reference") << "\n";
  if (report.padded_positives > 0) {
    out << "padding drew the positive as a negative " << report.padded_positives << " time(s)\n";
  }
  if (!report.losses_equal) out << "ranks report different losses\n";
  if (report.expect) {
    out << "expect      " << (report.expect->met ? "met" : "NOT MET") << " (loss error "
        << report.expect->loss_error << ", grad error " << report.expect->grad_error << ")\n";
  }
}

int run_run(const CommandContext& context) {
  std::string case_path, mutant_name;
  bool json = false;
  std::uint64_t schedule_seed = 0;
  po::options_description options("options");
  options.add_options()("case", po::value(&case_path)->value_name("FILE"), "the case file")(
      "json", po::bool_switch(&json), "print the SPEC section 8 result as JSON")(
      "schedule-seed", po::value(&schedule_seed)->value_name("N"),
      "random fiber interleaving with this seed (default: FIFO)")(
      "mutant", po::value(&mutant_name)->value_name("NAME"), "run a known-wrong variant");
  const auto values = parse_command_options(context, options);
  if (!values) return kExitOk;
  require_option(context, *values, "case", "FILE");
  const step::Mutant* mutant = mutant_named(mutant_name);
  const Case c = read_case_file(case_path);
  step::RunOptions run_options;
  if (values->count("schedule-seed")) {
    run_options.schedule = {sim::ScheduleKind::random, schedule_seed};
  }
  const step::CaseReport report = step::run_case(c, mutant, run_options);
  if (json) {
    print_json_line(context.out, case_report_json(c, report));
  } else {
    print_human(context.out, case_path, c, report, run_options, mutant);
  }
  const bool ok = report.pass && (!report.expect || report.expect->met);
  return ok ? kExitOk : kExitCheckFailed;
}

const RegisterCommand kRun{
    {"run", "--case FILE [--json] [--schedule-seed N] [--mutant NAME]",
     "run a case's data-parallel step on the simulator and compare with the reference", run_run}};

}  // namespace
}  // namespace infonce::cli
