// `infonce-sim strategies`: the strategy matrix (every strategy point x
// parameter group -> what step::predict derives), each cell with the command
// that reproduces its evidence, then the named configurations of real
// projects (step/field_configurations.*) on their points. Optionally the same
// as JSON (stable key order) and the matrix as an SVG (docs/strategies.svg).
// The predictions are a function of P and W alone; each wrong cell also gets
// a shrunk case of the strategy campaign at its point (seed 1, its own P and
// W) in each loss family of properties/strategy_families.hpp (InfoNCE, CLIP,
// NT-Xent), which --cases-dir writes as a case file for `replay`.
#include <unistd.h>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <ostream>
#include <sstream>
#include <string>

#include "base/error.hpp"
#include "casefile/case_json.hpp"
#include "cli/command.hpp"
#include "cli/output.hpp"
#include "cli/tool_options.hpp"
#include "properties/case_spec.hpp"
#include "properties/strategy_campaign.hpp"
#include "properties/strategy_families.hpp"
#include "properties/svg_canvas.hpp"
#include "step/field_configurations.hpp"
#include "step/strategy.hpp"

namespace infonce::cli {
namespace {

namespace fs = std::filesystem;
namespace po = boost::program_options;
using step::describe;
using step::name_of;
using step::ParameterGroup;
using step::Prediction;
using step::Strategy;

constexpr std::string_view kCommand = "strategies";
constexpr std::int64_t kMaxRanks = 1 << 16;
constexpr ParameterGroup kGroups[] = {ParameterGroup::encoders, ParameterGroup::direct};
// The brute-force check of every prediction (P in {1, 2, 3}, W in {P, 2P},
// equal and unequal batches, the loss families): the formulas it checks do
// not depend on P beyond that.
constexpr std::string_view kPredictionCheck =
    "build/tests/test_step --gtest_filter='StrategyPredictions.*'";
// The witnesses' campaign: seed 1, the default distribution.
constexpr std::uint64_t kWitnessSeed = 1;
constexpr std::int64_t kCampaignCases = 1000;

// A point whose wrong program is also a registered mutant of the main
// campaign, which shrinks its failure through every property.
struct MutantRun {
  Strategy strategy;
  std::string_view mutant;
  std::string_view note;
};

constexpr auto kOwnLive = step::GatherKind::detached_own_live;
constexpr auto kGlobal = step::LossScope::global;
const MutantRun kMutantRuns[] = {
    {{kOwnLive, kGlobal, step::BackwardScale::none, Reduction::mean},
     "no-compensation",
     "the trainer before the fix"},
    {{kOwnLive, kGlobal, step::BackwardScale::world_size, Reduction::mean},
     "scale-by-world",
     "fails on a mean-reduction case with W != P"},
    {{kOwnLive, kGlobal, step::BackwardScale::dp_shards, Reduction::sum},
     "compensate-under-sum",
     "fails on a sum-reduction case with P > 1"},
};

const MutantRun* mutant_run(const Strategy& strategy) {
  for (const MutantRun& run : kMutantRuns) {
    if (run.strategy == strategy) return &run;
  }
  return nullptr;
}

using properties::StrategyFamily;

// The loss families a cell's witnesses come from, in the order shown.
std::span<const StrategyFamily> families() {
  return properties::strategy_families();
}

// "autograd/local/scale-P/mean" -> "autograd-local-scale-P-mean.json" (the
// InfoNCE encoders'), "...-mean-direct.json", "...-mean-clip.json",
// "...-mean-clip-direct.json", "...-mean-ntxent.json", ...
std::string witness_file_name(const Strategy& strategy, const StrategyFamily& family,
                              ParameterGroup group) {
  std::string name = name_of(strategy);
  std::replace(name.begin(), name.end(), '/', '-');
  name += family.file_suffix;
  if (group == ParameterGroup::direct) name += "-direct";
  return name + ".json";
}

// The JSON key of a cell's witness in `family`: "witness" for the first
// family (InfoNCE, the key before there were others), "clip_witness", ...
std::string witness_key(std::size_t family) {
  return family == 0 ? "witness" : std::string(families()[family].key) + "_witness";
}

// Each wrong cell's shrunk case per family ([group][family][point], families
// in families() order, points in all_strategies() order), and where the case
// files were written (--cases-dir), if they were.
struct Witnesses {
  using PerPoint = std::vector<std::optional<properties::StrategyWitness>>;
  std::array<std::vector<PerPoint>, 2> found{std::vector<PerPoint>(families().size()),
                                             std::vector<PerPoint>(families().size())};
  std::optional<fs::path> dir;

  PerPoint& of(ParameterGroup group, std::size_t family) {
    return found[static_cast<std::size_t>(group)][family];
  }
  const PerPoint& of(ParameterGroup group, std::size_t family) const {
    return found[static_cast<std::size_t>(group)][family];
  }
};

// The verdict of a cell's shrunk case: the cell's own where the matrix
// calls it wrong, no single ratio where it is correct with equal batches
// only (the case then has unequal ones); none for a plainly correct cell.
std::optional<step::Verdict> witness_verdict(const Strategy& strategy, ParameterGroup group,
                                             const step::StepShape& shape) {
  const Prediction p = step::predict(strategy, group, shape);
  if (p.verdict != step::Verdict::correct) return p.verdict;
  if (p.depends_on_equal_batches) return step::Verdict::no_single_ratio;
  return std::nullopt;
}

std::optional<properties::StrategyWitness> find_witness(const Strategy& strategy,
                                                        const StrategyFamily& family,
                                                        ParameterGroup group,
                                                        const step::StepShape& shape) {
  const std::optional<step::Verdict> verdict = witness_verdict(strategy, group, shape);
  if (!verdict) return std::nullopt;
  properties::StrategyWitnessOptions options;
  options.verdict = verdict;
  options.point = strategy;
  options.seed = kWitnessSeed;
  options.family = family.choice;
  options.group = group;
  return properties::find_strategy_witness(options);
}

// The points the command shows: the dp ones (the default, as before the
// group axis), the world ones, or both (all_strategies() order).
std::vector<Strategy> shown_points(std::string_view groups) {
  std::vector<Strategy> out;
  for (const Strategy& strategy : step::all_strategies()) {
    const bool world = strategy.group == step::GatherGroup::world;
    if (groups == "both" || (groups == "world") == world) out.push_back(strategy);
  }
  return out;
}

Witnesses find_witnesses(const step::StepShape& shape, const std::optional<fs::path>& dir,
                         const std::vector<Strategy>& points) {
  Witnesses w;
  w.dir = dir;
  if (dir) fs::create_directories(*dir);  // checked writable by parse_options
  for (const ParameterGroup group : kGroups) {
    for (std::size_t f = 0; f < families().size(); ++f) {
      const StrategyFamily& family = families()[f];
      Witnesses::PerPoint& found = w.of(group, f);
      for (const Strategy& strategy : step::all_strategies()) {
        if (std::find(points.begin(), points.end(), strategy) == points.end()) {
          found.emplace_back();  // not shown
          continue;
        }
        found.push_back(find_witness(strategy, family, group, shape));
        if (dir && found.back()) {
          write_case_file(found.back()->shrunk_case,
                          *dir / witness_file_name(strategy, family, group));
        }
      }
    }
  }
  return w;
}

const properties::StrategyWitness* witness_of(const Witnesses& w, const Strategy& strategy,
                                              std::size_t family, ParameterGroup group) {
  const auto& found = w.of(group, family)[properties::strategy_index(strategy)];
  return found ? &*found : nullptr;
}

std::string check_command(const Strategy& strategy) {
  return "infonce-sim check --strategies " + name_of(strategy) + " --seed " +
         std::to_string(kWitnessSeed) + " --cases " + std::to_string(kCampaignCases);
}

std::string witness_text(const properties::StrategyWitness& w) {
  return "shrunk: " + w.shrunk_text + " (case " + std::to_string(w.index) + ", " +
         std::to_string(w.shrink_steps) + " shrink steps): predicted " + describe(w.predicted) +
         ", observed " + w.observed;
}

struct Cell {
  Prediction prediction;
  Prediction unequal;  // the same point with unequal per-shard batches
  std::string reproduce;
  std::string note;
  // The cell's shrunk case in each family (families() order), where it is wrong.
  std::vector<const properties::StrategyWitness*> witnesses;
  bool has_witness() const {
    return std::any_of(witnesses.begin(), witnesses.end(),
                       [](const properties::StrategyWitness* w) { return w != nullptr; });
  }
};

Cell cell_of(const Strategy& strategy, ParameterGroup group, const step::StepShape& shape,
             const Witnesses& witnesses) {
  Cell cell;
  cell.prediction = step::predict(strategy, group, shape);
  step::StepShape unequal = shape;
  unequal.equal_batches = shape.dp == 1;  // one shard cannot differ from itself
  cell.unequal = step::predict(strategy, group, unequal);
  cell.reproduce = check_command(strategy);
  for (std::size_t f = 0; f < families().size(); ++f) {
    cell.witnesses.push_back(witness_of(witnesses, strategy, f, group));
  }
  cell.note =
      "the rank program at this point: every case as predicted for its own P, W, and "
      "correct with a gather";
  if (cell.witnesses[0]) cell.note = witness_text(*cell.witnesses[0]);
  return cell;
}

std::string_view verdict_key(step::Verdict verdict) {
  switch (verdict) {
    case step::Verdict::correct:
      return "correct";
    case step::Verdict::ratio:
      return "ratio";
    case step::Verdict::no_single_ratio:
      return "no-single-ratio";
  }
  return "?";
}

// ---- parsing --------------------------------------------------------------

struct Options {
  step::StepShape shape;
  std::vector<Strategy> points;  // --group's
  std::optional<fs::path> json;
  std::optional<fs::path> svg;
  std::optional<fs::path> cases_dir;
};

// Checked before any work: the file's directory exists and is writable.
fs::path output_path(std::string_view option, const std::string& text) {
  const std::string problem =
      std::string(kCommand) + ": " + std::string(option) + " '" + text + "'";
  const fs::path path(text);
  std::error_code error;
  if (text.empty() || fs::is_directory(path, error)) throw UsageError(problem + " is a directory");
  const fs::path parent = path.has_parent_path() ? path.parent_path() : fs::path(".");
  if (!fs::is_directory(parent, error)) {
    throw UsageError(problem + ": no directory '" + parent.string() + "'");
  }
  if (::access(parent.c_str(), W_OK) != 0 ||
      (fs::exists(path, error) && ::access(path.c_str(), W_OK) != 0)) {
    throw UsageError(problem + " is not writable");
  }
  return path;
}

Options parse_options(const po::variables_map& values) {
  Options options;
  const auto text = [&](const char* name) { return values[name].as<std::string>(); };
  options.shape.dp =
      values.count("dp")
          ? static_cast<std::int32_t>(parse_count(kCommand, "--dp", text("dp"), kMaxRanks))
          : 4;
  options.shape.world =
      values.count("world")
          ? static_cast<std::int32_t>(parse_count(kCommand, "--world", text("world"), kMaxRanks))
          : 2 * options.shape.dp;
  if (options.shape.world % options.shape.dp != 0) {
    throw UsageError(std::string(kCommand) + ": --world " + std::to_string(options.shape.world) +
                     " is not a multiple of --dp " + std::to_string(options.shape.dp));
  }
  const std::string groups = values.count("group") ? text("group") : "dp";
  if (groups != "dp" && groups != "world" && groups != "both") {
    throw UsageError(std::string(kCommand) + ": --group must be dp, world or both, not '" +
                     groups.substr(0, 60) + "'");
  }
  options.points = shown_points(groups);
  if (values.count("json")) options.json = output_path("--json", text("json"));
  if (values.count("svg")) options.svg = output_path("--svg", text("svg"));
  if (values.count("cases-dir")) {
    check_writable_dir(kCommand, "--cases-dir", text("cases-dir"));
    options.cases_dir = fs::path(text("cases-dir"));
  }
  return options;
}

// ---- human ----------------------------------------------------------------

void print_matrix(std::ostream& out, const step::StepShape& shape,
                  const std::vector<Strategy>& points) {
  out << "strategy matrix: P = " << shape.dp << " data-parallel shards, W = " << shape.world
      << " ranks, equal per-shard batches (step::predict, docs/strategies.md)\n"
      << "[equal batches]: the verdict holds only when every shard has the same number of "
         "queries; with unequal ones it is no single ratio\n\n";
  char line[256];
  std::snprintf(line, sizeof line, "%-40s %-34s %s\n", "strategy point", "encoders",
                "direct parameters");
  out << line;
  for (const Strategy& strategy : points) {
    const std::string encoders = describe(step::predict(strategy, kGroups[0], shape));
    const std::string direct = describe(step::predict(strategy, kGroups[1], shape));
    std::snprintf(line, sizeof line, "%-40s %-34s %s\n", name_of(strategy).c_str(),
                  encoders.c_str(), direct.c_str());
    out << line;
  }
}

void print_reproduce(std::ostream& out, const step::StepShape& shape, const Witnesses& witnesses,
                     const std::vector<Strategy>& points) {
  out << "\nreproduce:\n"
      << "  every cell's prediction, by brute force: " << kPredictionCheck << '\n'
      << "  both groups, through the rank program at each point (the strategy campaign draws "
         "its own P, W, and runs every loss family; each wrong cell's first visibly wrong case "
         "per family, shrunk):\n";
  for (const Strategy& strategy : points) {
    out << "    " << name_of(strategy) << ": " << check_command(strategy) << '\n';
    for (const ParameterGroup group : kGroups) {
      const Cell cell = cell_of(strategy, group, shape, witnesses);
      for (std::size_t f = 0; f < families().size(); ++f) {
        const properties::StrategyWitness* w = cell.witnesses[f];
        if (w == nullptr) continue;
        out << "      " << name_of(group) << ", " << families()[f].key << ": " << witness_text(*w)
            << '\n';
        if (witnesses.dir) {
          out << "      replay: infonce-sim replay "
              << (*witnesses.dir / witness_file_name(strategy, families()[f], group)).string()
              << '\n';
        }
      }
      if (!cell.has_witness()) {
        out << "      " << name_of(group) << ": " << cell.note << '\n';
      }
    }
    if (const MutantRun* run = mutant_run(strategy)) {
      out << "      also: infonce-sim check --cases 1000 --no-corpus --mutant " << run->mutant
          << " (" << run->note << ": the main campaign fails, shrunk)\n";
    }
  }
  if (!witnesses.dir)
    out << "  (--cases-dir DIR writes each shrunk case for `infonce-sim replay`)\n";
}

std::string direct_text(const step::FieldConfiguration& c, const step::StepShape& shape) {
  const std::string verdict = describe(step::predict(c.strategy, ParameterGroup::direct, shape));
  if (c.direct_parameters.empty()) return "none (a learnable one: " + verdict + ")";
  return std::string(c.direct_parameters) + ": " + verdict;
}

void print_field(std::ostream& out, const step::StepShape& shape) {
  out << "\nnamed configurations of real projects (docs/field.md cites each source; "
      << "† some cell rests on something the cited file does not show):\n";
  for (const step::FieldConfiguration& c : step::field_configurations()) {
    char number[16];
    std::snprintf(number, sizeof number, "%2d", c.row);
    out << number << (c.unconfirmed ? " † " : "   ") << c.project << ": " << c.configuration
        << "\n     " << c.source << "\n     " << name_of(c.strategy)
        << "  encoders: " << describe(step::predict(c.strategy, ParameterGroup::encoders, shape))
        << "  direct: " << direct_text(c, shape) << '\n';
  }
}

// ---- JSON -----------------------------------------------------------------

OutputJson prediction_json(const Prediction& p) {
  OutputJson out;
  out["verdict"] = verdict_key(p.verdict);
  out["ratio"] = p.verdict == step::Verdict::no_single_ratio ? OutputJson() : OutputJson(p.ratio);
  out["cause"] = p.cause == step::NoRatioCause::none ? OutputJson() : OutputJson(name_of(p.cause));
  out["equal_batches_only"] = p.depends_on_equal_batches;
  out["text"] = describe(p);
  return out;
}

OutputJson witness_json(const properties::StrategyWitness& w) {
  OutputJson out;
  out["seed"] = kWitnessSeed;
  out["case_index"] = w.index;
  out["shrink_steps"] = w.shrink_steps;
  out["original"] = w.original_text;
  out["shrunk"] = w.shrunk_text;
  out["predicted"] = describe(w.predicted);
  out["observed"] = w.observed;
  return out;
}

OutputJson cell_json(const Cell& cell) {
  OutputJson out = prediction_json(cell.prediction);
  out["with_unequal_batches"] = describe(cell.unequal);
  out["reproduce"] = cell.reproduce;
  out["note"] = cell.note;
  for (std::size_t f = 0; f < families().size(); ++f) {
    out[witness_key(f)] = cell.witnesses[f] ? witness_json(*cell.witnesses[f]) : OutputJson();
  }
  return out;
}

OutputJson matrix_document(const step::StepShape& shape, const Witnesses& witnesses,
                           const std::vector<Strategy>& points) {
  OutputJson doc;
  doc["command"] = "strategies";
  doc["dp"] = shape.dp;
  doc["world"] = shape.world;
  doc["prediction_check"] = kPredictionCheck;
  OutputJson rows = OutputJson::array();
  for (const Strategy& strategy : points) {
    OutputJson point;
    point["strategy"] = name_of(strategy);
    point["gather"] = name_of(strategy.gather);
    point["scope"] = name_of(strategy.scope);
    point["scale"] = name_of(strategy.scale);
    point["reduction"] = name_of(strategy.reduction);
    // Only a world point has the key: a dp matrix's bytes stay as they were.
    if (strategy.group == step::GatherGroup::world) point["group"] = name_of(strategy.group);
    for (const ParameterGroup group : kGroups) {
      point["cells"][std::string(name_of(group))] =
          cell_json(cell_of(strategy, group, shape, witnesses));
    }
    rows.push_back(point);
  }
  doc["matrix"] = rows;
  OutputJson field = OutputJson::array();
  for (const step::FieldConfiguration& c : step::field_configurations()) {
    OutputJson row;
    row["row"] = c.row;
    row["project"] = c.project;
    row["configuration"] = c.configuration;
    row["source"] = c.source;
    row["strategy"] = name_of(c.strategy);
    row["direct_parameters"] = c.direct_parameters;
    row["unconfirmed"] = c.unconfirmed;
    row["encoders"] = prediction_json(step::predict(c.strategy, ParameterGroup::encoders, shape));
    row["direct"] = prediction_json(step::predict(c.strategy, ParameterGroup::direct, shape));
    field.push_back(row);
  }
  doc["field"] = field;
  return doc;
}

// ---- SVG ------------------------------------------------------------------

constexpr int kSvgWidth = 1500;
constexpr int kMargin = 20;
constexpr int kPointWidth = 300;
constexpr int kCellWidth = 580;
constexpr int kRowHeight = 22;
constexpr int kTop = 74;
constexpr const char* kFont = "DejaVu Sans, Helvetica, Arial, sans-serif";

const char* fill_of(const Prediction& p) {
  switch (p.verdict) {
    case step::Verdict::correct:
      return "#c8e6c9";
    case step::Verdict::ratio:
      return "#ffe0b2";
    case step::Verdict::no_single_ratio:
      return "#ffcdd2";
  }
  return "#ffffff";
}

void draw_cell(properties::SvgCanvas& svg, double x, double y, const Cell& cell) {
  svg.rect(x, y, kCellWidth, kRowHeight, fill_of(cell.prediction),
           R"(stroke="#1b1b1b" stroke-width="2")", cell.reproduce + " (" + cell.note + ")");
  svg.text(x + 8, y + 15, describe(cell.prediction), 12);
  std::string shrunk;
  for (std::size_t f = 0; f < families().size(); ++f) {
    if (cell.witnesses[f] == nullptr) continue;
    // The first family's (InfoNCE's) mesh unnamed, the others after their key.
    shrunk += (shrunk.empty() ? "shrunk " : " · ") +
              (f == 0 ? std::string() : std::string(families()[f].key) + " ") +
              properties::describe_mesh(cell.witnesses[f]->shrunk);
  }
  if (!shrunk.empty()) {
    svg.text(x + kCellWidth - 6, y + 15, shrunk, 10, R"(text-anchor="end" fill="#37474f")");
  }
}

void draw_legend(properties::SvgCanvas& svg, double y) {
  const std::pair<const char*, const char*> kinds[] = {
      {"#c8e6c9", "correct"},
      {"#ffe0b2", "exact ratio r (the step is r x the full-batch gradient)"},
      {"#ffcdd2", "no single ratio"}};
  for (const auto& [fill, label] : kinds) {
    svg.rect(kMargin, y, 14, 14, fill);
    svg.text(kMargin + 22, y + 12, label, 12);
    y += 20;
  }
  svg.rect(kMargin, y, 14, 14, "#ffffff", R"(stroke="#1b1b1b" stroke-width="2")");
  svg.text(kMargin + 22, y + 12,
           "every cell runs through the rank program in every loss family (infonce-sim check "
           "--strategies POINT [--family all])",
           12);
  svg.text(kMargin, y + 38,
           "[equal batches]: holds only when every shard has the same number of queries.", 11);
  svg.text(kMargin, y + 54,
           "Every prediction is checked by brute force (tests/step/strategy_test.cpp).", 11);
  svg.text(kMargin, y + 70,
           "shrunk: the mesh of the cell's case in each family (InfoNCE, clip, ntxent, siglip) shrunk by "
           "RapidCheck (infonce-sim strategies --cases-dir DIR writes them for replay).",
           11);
}

std::string matrix_svg(const step::StepShape& shape, const Witnesses& witnesses,
                       const std::vector<Strategy>& points) {
  properties::SvgCanvas svg(kSvgWidth, kFont);
  svg.text(kMargin, 28, "Gather strategies: predicted step gradient / full-batch gradient", 16,
           R"(font-weight="bold")");
  svg.text(kMargin, 48,
           "P = " + std::to_string(shape.dp) +
               " data-parallel shards, W = " + std::to_string(shape.world) +
               " ranks, equal per-shard batches (infonce-sim strategies; docs/strategies.md)",
           12);
  const double x_cells = kMargin + kPointWidth;
  svg.text(kMargin, kTop - 6, "strategy point (gather/scope/scale/reduction)", 12,
           R"(font-weight="bold")");
  svg.text(x_cells + 8, kTop - 6, "encoders", 12, R"(font-weight="bold")");
  svg.text(x_cells + kCellWidth + 8, kTop - 6, "direct parameters", 12, R"(font-weight="bold")");
  double y = kTop;
  for (const Strategy& strategy : points) {
    svg.text(kMargin, y + 15, name_of(strategy), 12,
             R"(font-family="DejaVu Sans Mono, Menlo, Consolas, monospace")");
    double x = x_cells;
    for (const ParameterGroup group : kGroups) {
      draw_cell(svg, x, y, cell_of(strategy, group, shape, witnesses));
      x += kCellWidth;
    }
    y += kRowHeight;
  }
  draw_legend(svg, y + 16);
  std::ostringstream out;
  svg.write(out, static_cast<int>(y) + 166);
  return out.str();
}

// ---- the command ----------------------------------------------------------

int run_strategies(const CommandContext& context) {
  po::options_description description("options");
  description.add_options()("dp", po::value<std::string>()->value_name("P"),
                            "data-parallel shards (default 4)")(
      "world", po::value<std::string>()->value_name("W"),
      "world ranks, a multiple of P (default 2 x P)")(
      "json", po::value<std::string>()->value_name("FILE"), "also write the matrix as JSON")(
      "svg", po::value<std::string>()->value_name("FILE"), "also write the matrix as an SVG")(
      "cases-dir", po::value<std::string>()->value_name("DIR"),
      "write each wrong point's shrunk case to DIR (for infonce-sim replay)")(
      "group", po::value<std::string>()->value_name("dp|world|both"),
      "the gather's group of the points shown: dp (default), world (every rank, each shard R "
      "times; names end in /world) or both");
  const auto values = parse_command_options(context, description);
  if (!values) return kExitOk;
  const Options options = parse_options(*values);
  const Witnesses witnesses = find_witnesses(options.shape, options.cases_dir, options.points);
  print_matrix(context.out, options.shape, options.points);
  print_reproduce(context.out, options.shape, witnesses, options.points);
  print_field(context.out, options.shape);
  if (options.json) {
    write_text_file_atomically(
        *options.json, matrix_document(options.shape, witnesses, options.points).dump(2) + "\n");
  }
  if (options.svg) {
    write_text_file_atomically(*options.svg, matrix_svg(options.shape, witnesses, options.points));
  }
  return kExitOk;
}

const RegisterCommand kStrategies{
    {"strategies",
     "[--dp P] [--world W] [--group dp|world|both] [--json FILE] [--svg FILE] [--cases-dir DIR]",
     "the strategy matrix (strategy point x parameter group) and real projects' configurations",
     run_strategies}};

}  // namespace
}  // namespace infonce::cli
