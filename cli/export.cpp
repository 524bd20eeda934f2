// `infonce-sim export --seed S --cases K [--limits default|typical]
//  [--mesh W/P,...] [--compensate both|true|false] [--padding both|fixed|legacy] DIR`:
// writes K generated cases as canonical case files, each with its hard-negative
// padding draws recorded, so another framework (tests/torch/ddp_conformance.py)
// can run exactly the same step. Files are a function of the options alone.
#include <algorithm>
#include <filesystem>
#include <iterator>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "casefile/case_json.hpp"
#include "cli/command.hpp"
#include "properties/campaign.hpp"
#include "step/recorded_padding.hpp"
#include "step/run_case.hpp"

namespace infonce::cli {
namespace {
namespace po = boost::program_options;

constexpr std::string_view kUsage =
    "--seed S --cases K [--limits default|typical] [--mesh W/P,...] "
    "[--compensate both|true|false] [--padding both|fixed|legacy] DIR";

struct ExportOptions {
  std::uint64_t seed = 1;
  std::int64_t cases = 0;
  properties::GeneratorLimits limits = properties::default_limits();
  std::vector<Mesh> meshes;            // empty: the generator's own
  std::vector<bool> compensate{true};  // one file per value
  std::vector<loss::Padding> paddings{loss::Padding::fixed};
  std::filesystem::path dir;
};

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::istringstream in(text);
  for (std::string part; std::getline(in, part, separator);) parts.push_back(part);
  return parts;
}

std::int32_t mesh_number(const std::string& text, const std::string& item) {
  std::size_t used = 0;
  long value = 0;
  try {
    value = text.empty() || text[0] == '-' || text[0] == '+' ? -1 : std::stol(text, &used);
  } catch (const std::exception&) {
    value = -1;
  }
  if (used != text.size() || value < 1 || value > CaseLimits::kMaxWorld) {
    throw UsageError("export: --mesh '" + item + "': expected W/P with 1 <= P <= W <= " +
                     std::to_string(CaseLimits::kMaxWorld) + " and P dividing W");
  }
  return static_cast<std::int32_t>(value);
}

std::vector<Mesh> parse_meshes(const std::string& text) {
  std::vector<Mesh> meshes;
  for (const std::string& item : split(text, ',')) {
    const std::vector<std::string> numbers = split(item, '/');
    if (numbers.size() != 2) {
      throw UsageError("export: --mesh '" + item + "': expected W/P, e.g. 4/2");
    }
    const Mesh mesh{mesh_number(numbers[0], item), mesh_number(numbers[1], item)};
    if (mesh.world % mesh.dp != 0) {
      throw UsageError("export: --mesh '" + item + "': P = " + std::to_string(mesh.dp) +
                       " does not divide W = " + std::to_string(mesh.world));
    }
    meshes.push_back(mesh);
  }
  if (meshes.empty()) throw UsageError("export: --mesh: expected at least one W/P");
  return meshes;
}

std::optional<ExportOptions> parse(const CommandContext& context) {
  ExportOptions o;
  std::string limits = "default", mesh, compensate = "true", padding = "fixed";
  po::options_description options("options (DIR: where the case files go)");
  options.add_options()("seed", po::value(&o.seed)->value_name("S"), "generator seed (default 1)")(
      "cases", po::value(&o.cases)->value_name("K"), "how many generated cases to write")(
      "limits", po::value(&limits)->value_name("default|typical"), "generator distribution")(
      "mesh", po::value(&mesh)->value_name("W/P,..."),
      "case i gets the (i mod n)-th mesh; each micro-step's shard list is trimmed, or padded "
      "with copies of shard 0's groups")(
      "compensate", po::value(&compensate)->value_name("both|true|false"),
      "the fix on, off, or both (files NAME-fixed.json and NAME-prefix.json)")(
      "padding", po::value(&padding)->value_name("both|fixed|legacy"),
      "hard-negative padding; both adds a NAME-legacypad twin of every case with hard_negatives");
  const auto values = parse_options_and_words(context, options, "dir", 1);
  if (!values) return std::nullopt;
  require_option(context, *values, "cases", "K");
  if (values->count("dir") == 0) throw UsageError("export: missing DIR (where the case files go)");
  o.dir = (*values)["dir"].as<std::vector<std::string>>().front();
  if (o.cases < 1) throw UsageError("export: --cases must be at least 1");
  if (limits == "typical") {
    o.limits = properties::typical_limits();
  } else if (limits != "default") {
    throw UsageError("export: --limits must be 'default' or 'typical', not '" + limits + "'");
  }
  if (values->count("mesh")) o.meshes = parse_meshes(mesh);
  if (compensate == "both") {
    o.compensate = {true, false};
  } else if (compensate == "true" || compensate == "false") {
    o.compensate = {compensate == "true"};
  } else {
    throw UsageError("export: --compensate must be 'both', 'true' or 'false', not '" + compensate +
                     "'");
  }
  if (padding == "both") {
    o.paddings = {loss::Padding::fixed, loss::Padding::legacy};
  } else if (padding == "fixed" || padding == "legacy") {
    o.paddings = {padding == "fixed" ? loss::Padding::fixed : loss::Padding::legacy};
  } else {
    throw UsageError("export: --padding must be 'both', 'fixed' or 'legacy', not '" + padding +
                     "'");
  }
  return o;
}

// Forces a mesh on a spec: each micro-step keeps its first P shard lists, or
// gains copies of shard 0's (shard 0 always has a group, so the case stays
// valid with or without use_batch).
properties::CaseSpec with_mesh(properties::CaseSpec spec, const Mesh& mesh) {
  spec.world = mesh.world;
  spec.dp = mesh.dp;
  for (auto& shards : spec.negatives) {
    // New shards get the groups of the first shard that has any (a generated
    // shard may be empty, rank 0's included); a micro-step keeps a group.
    const auto full = std::find_if(shards.begin(), shards.end(),
                                   [](const auto& groups) { return !groups.empty(); });
    const std::vector<std::int32_t> first = full != shards.end() ? *full : shards.front();
    shards.resize(static_cast<std::size_t>(mesh.dp), first);
    if (std::all_of(shards.begin(), shards.end(), [](const auto& g) { return g.empty(); })) {
      shards.front() = first;
    }
  }
  return spec;
}

// The reference accepts it (not every logit of a row masked, ...).
bool reference_accepts(const Case& c) {
  try {
    validate_case(c);
    (void)step::compute_case_reference(c);
    return true;
  } catch (const InputError&) {
    return false;
  }
}

std::string file_name(const ExportOptions& o, std::int64_t index, loss::Padding padding,
                      bool compensate) {
  std::string name = "case-" + std::to_string(o.seed) + "-" + std::to_string(index);
  if (o.paddings.size() > 1 && padding == loss::Padding::legacy) name += "-legacypad";
  if (o.compensate.size() > 1) name += compensate ? "-fixed" : "-prefix";
  return name + ".json";
}

// Another framework sums in its own order. In float32, rows scaled up to
// 1e4 (the magnitudes style) or an exact tie with the mask threshold leave
// each side's result right for its own rounding and not for the other's
// (seed 2026 case 107: torch and infonce-sim 0.87% apart, each within its own
// reference's tolerance), so exported float32 cases keep normal features.
properties::CaseSpec comparable_across_frameworks(properties::CaseSpec spec) {
  using properties::FeatureStyle;
  const bool tie_prone = spec.features == FeatureStyle::threshold_ties ||
                         spec.features == FeatureStyle::duplicated ||
                         spec.features == FeatureStyle::collinear;
  if (spec.scalar == ScalarType::float32 &&
      (spec.features == FeatureStyle::magnitudes || (tie_prone && spec.mask_fake_negative))) {
    spec.features = FeatureStyle::normal;
  }
  return spec;
}

// The files of generated case `index` (none if the reference rejects a variant).
std::vector<std::pair<std::string, Case>> variants_of(const ExportOptions& o, std::int64_t index) {
  properties::CaseSpec spec = properties::generate_case(o.seed, index, o.limits).value();
  if (!o.meshes.empty())
    spec = with_mesh(spec, o.meshes[static_cast<std::size_t>(index) % o.meshes.size()]);
  spec = comparable_across_frameworks(spec);
  const Case base = step::with_recorded_padding(properties::build_case(spec));
  std::vector<std::pair<std::string, Case>> files;
  for (const loss::Padding padding : o.paddings) {
    // A legacy twin only where padding happens (elsewhere it is the same step).
    if (padding == loss::Padding::legacy && o.paddings.size() > 1 && !base.loss.hard_negatives) {
      continue;
    }
    Case c = base;
    c.loss.padding = padding;
    if (!reference_accepts(c)) return {};
    for (const bool compensate : o.compensate) {
      c.compensate = compensate;
      files.emplace_back(file_name(o, index, padding, compensate), c);
    }
  }
  return files;
}

int run_export(const CommandContext& context) {
  const auto options = parse(context);
  if (!options) return kExitOk;
  const ExportOptions& o = *options;
  std::error_code error;
  std::filesystem::create_directories(o.dir, error);
  if (error) throw InputError("export: cannot create " + o.dir.string() + ": " + error.message());
  // Rejected cases are skipped; the search stops after this many indices.
  const std::int64_t max_index = 10 * o.cases + 100;
  std::int64_t written = 0, files = 0, index = 0;
  std::vector<std::int64_t> rejected;
  for (; written < o.cases && index < max_index; ++index) {
    const auto variants = variants_of(o, index);
    if (variants.empty()) {
      rejected.push_back(index);
      continue;
    }
    for (const auto& [name, c] : variants) write_case_file(c, o.dir / name);
    files += static_cast<std::int64_t>(variants.size());
    ++written;
  }
  context.out << "export: seed " << o.seed << ", " << written << " cases (" << files
              << " files) in " << o.dir.string() << "; " << rejected.size()
              << " rejected by the reference";
  if (!rejected.empty()) {
    context.out << " (indices";
    for (const std::int64_t i : rejected) context.out << " " << i;
    context.out << ")";
  }
  context.out << "\n";
  if (written < o.cases) {
    context.err << kProgram << ": error: export: only " << written << " of " << o.cases
                << " cases accepted in " << max_index << " indices\n";
    return kExitCheckFailed;
  }
  return kExitOk;
}

const RegisterCommand kExport{
    {"export", kUsage,
     "write generated cases, padding draws recorded, as case files for another framework",
     run_export}};

}  // namespace
}  // namespace infonce::cli
