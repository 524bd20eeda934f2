// `infonce-sim classify --sut CMD`: which points of the strategy matrix an
// external step runs (properties/classify.hpp). The SUT runs its own point on
// a designed set of cases its handshake allows; the report names the points
// whose loss and gradients it matches on every case (several: equivalent on
// every case tried), what follows per parameter group, or, when it matches
// none, the case that rules out each point. Exit 0 when a point matches, 1
// when none does.
#include <memory>
#include <ostream>
#include <string>

#include "base/error.hpp"
#include "cli/command.hpp"
#include "cli/tool_options.hpp"
#include "properties/classify.hpp"
#include "properties/sut_step.hpp"
#include "step/strategy.hpp"
#include "sut/session.hpp"

namespace infonce::cli {
namespace {

namespace po = boost::program_options;

void print_cases(std::ostream& out, const properties::Classification& c,
                 const std::vector<std::string>& outside) {
  out << "cases run: " << c.ran.size() << "\n";
  for (const std::string& name : c.ran) out << "  " << name << "\n";
  for (const std::string& line : c.declined) out << "  declined: " << line << "\n";
  for (const std::string& line : c.failed) out << "  failed: " << line << "\n";
  for (const std::string& line : outside) out << "  outside the handshake: " << line << "\n";
}

void print_matches(std::ostream& out, const std::vector<step::Strategy>& matching) {
  out << "matches " << matching.size() << (matching.size() == 1 ? " point" : " points")
      << (matching.size() > 1 ? " (equivalent on every case tried):" : ":") << "\n";
  for (const step::Strategy& point : matching) {
    out << "  " << step::name_of(point) << "\n";
    for (const std::string& line : properties::consequences(point)) out << "    " << line << "\n";
  }
}

void print_ruled_out(std::ostream& out, const properties::Classification& c) {
  std::string gradients;
  for (const properties::PointClassification& p : c.points) {
    if (p.gradients_match) gradients += std::string("\n  ") + std::string(step::name_of(p.point));
  }
  out << "matches no point";
  if (!gradients.empty()) {
    out << ": its gradients are, on every case, those of the points below, but not its "
           "reported loss (a loss apart from its gradient):"
        << gradients << "\n";
  }
  out << (gradients.empty() ? "; " : "") << "the case that rules out each:\n";
  for (const properties::PointClassification& p : c.points) {
    out << "  " << step::name_of(p.point) << ": "
        << (p.judged == 0 ? std::string("not tried (no case of its reduction ran)")
                          : p.ruled_out_by)
        << "\n";
  }
}

int run_classify(const CommandContext& context) {
  std::optional<std::string> sut_command, sut_timeout;
  po::options_description options("options");
  add_sut_options(options, /*with_restrict=*/false);
  const auto values = parse_command_options(context, options);
  if (!values) return kExitOk;
  if (values->count("sut")) sut_command = (*values)["sut"].as<std::string>();
  if (values->count("sut-timeout")) sut_timeout = (*values)["sut-timeout"].as<std::string>();
  if (!sut_command) throw UsageError("classify: --sut CMD is required");
  const SutChoice choice = parse_sut("classify", sut_command, sut_timeout);
  sut::Session session(choice.command, choice.timeout_seconds);
  const sut::Supports supports = session.handshake().supports;
  std::vector<std::string> outside;
  const properties::StepSupports inside = [&](const Case& c) {
    return sut::outside_supports(c, supports);
  };
  auto cases = properties::designed_cases(inside, supports.infonce_family,
                                          supports.clip_family && supports.declares("family"),
                                          supports.declares("learnable_temperature"), &outside);
  if (supports.ntxent_family && supports.declares("family")) {
    for (auto& c : properties::designed_ntxent_cases(
             inside, supports.declares("learnable_temperature"), &outside)) {
      cases.push_back(std::move(c));
    }
  }
  if (supports.siglip_family && supports.declares("family")) {
    for (auto& c : properties::designed_siglip_cases(inside, &outside))
      cases.push_back(std::move(c));
  }
  const properties::Classification result =
      properties::classify_step(cases, [&](const Case& c, const step::ReferenceValues& reference) {
        return properties::run_on_sut(session, c, reference);
      });
  std::ostream& out = context.out;
  out << "classify: the SUT " << session.handshake().name << "\n";
  print_cases(out, result, outside);
  const std::vector<step::Strategy> matching = result.matching();
  if (matching.empty()) {
    print_ruled_out(out, result);
    return kExitCheckFailed;
  }
  print_matches(out, matching);
  return kExitOk;
}

const RegisterCommand kClassify{
    {"classify", "--sut CMD [--sut-timeout S]",
     "which strategy points an external step runs: its loss and gradients on designed cases "
     "against the rank program at every point",
     run_classify}};

}  // namespace
}  // namespace infonce::cli
