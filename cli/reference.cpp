// `infonce-sim reference --case FILE [--json]`: the full-batch reference of a
// case (MODEL.md section 4), i.e. the "reference" part of a run's result
// (MODEL.md section 8). The case's `expect` is ignored.
#include <ostream>
#include <string>
#include <vector>

#include "casefile/case.hpp"
#include "casefile/case_json.hpp"
#include "cli/command.hpp"
#include "cli/output.hpp"
#include "step/run_case.hpp"

namespace infonce::cli {
namespace {
namespace po = boost::program_options;

using ReferenceOutput = step::ReferenceValues;

// In the case's own scalar type (a float32 case's reference is computed in
// float, as `run` compares it), widened to double for printing.
ReferenceOutput case_reference(const Case& c) {
  return step::compute_case_reference(c);
}

void print_json(std::ostream& out, const Case& c, const ReferenceOutput& reference) {
  OutputJson document;
  document["loss"] = reference.loss;
  if (!c.loss.use_batch) document["shard_losses"] = numbers_json(reference.shard_losses);
  document["grad"] = matrix_json(reference.grad);
  print_json_line(out, document);
}

void print_table(std::ostream& out, const std::string& path, const Case& c,
                 const ReferenceOutput& reference) {
  out << "case          " << path << '\n'
      << "mesh          world " << c.mesh.world << ", dp " << c.mesh.dp << " (" << c.mesh.replicas()
      << " replica(s) per DP shard)\n"
      << "use_batch     " << (c.loss.use_batch ? "true" : "false") << '\n'
      << "accumulation  " << c.accumulation_steps << " micro-step(s), "
      << (c.accumulation_window ? std::to_string(*c.accumulation_window) + " in the window, " : "")
      << (c.accumulation_normalize ? "normalized" : "not normalized") << '\n'
      << "dtype         " << (c.scalar == ScalarType::float64 ? "float64" : "float32") << "\n\n"
      << "loss          " << full_precision(reference.loss) << '\n';
  if (!c.loss.use_batch) {
    for (std::size_t d = 0; d < reference.shard_losses.size(); ++d) {
      out << "shard " << d << " loss  " << full_precision(reference.shard_losses[d]) << '\n';
    }
  }
  out << "\ngradient dL/dW (D x F = " << reference.grad.rows() << " x " << reference.grad.cols()
      << ")\n";
  print_matrix_table(out, reference.grad);
}

int run_reference(const CommandContext& context) {
  std::string case_path;
  bool json = false;
  po::options_description options("options");
  options.add_options()("case", po::value(&case_path)->value_name("FILE"),
                        "the case file (infonce-case/1)")(
      "json", po::bool_switch(&json), "print {\"loss\", \"shard_losses\"?, \"grad\"} as JSON");
  const auto values = parse_command_options(context, options);
  if (!values) return kExitOk;
  require_option(context, *values, "case", "FILE");
  const Case c = read_case_file(case_path);
  const ReferenceOutput reference = case_reference(c);
  if (json) {
    print_json(context.out, c, reference);
  } else {
    print_table(context.out, case_path, c, reference);
  }
  return kExitOk;
}

const RegisterCommand kReference{
    {"reference", "--case FILE [--json]",
     "print the full-batch reference loss and gradient of a case (ignores its expect)",
     run_reference}};

}  // namespace
}  // namespace infonce::cli
