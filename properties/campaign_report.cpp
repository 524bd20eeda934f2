#include "properties/campaign_report.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "casefile/case_json.hpp"

namespace infonce::properties {
namespace {

using Json = nlohmann::ordered_json;

// ---------------------------------------------------------------------------
// Writing

Json spec_json(const CaseSpec& spec) {
  Json out;
  out["world"] = spec.world;
  out["dp"] = spec.dp;
  out["negatives"] = spec.negatives;
  out["accumulation_normalize"] = spec.accumulation_normalize;
  out["feature_dim"] = spec.feature_dim;
  out["embedding_dim"] = spec.embedding_dim;
  out["normalize"] = spec.normalize;
  out["use_batch"] = spec.use_batch;
  out["hard_negatives"] = spec.hard_negatives;
  out["mask_fake_negative"] = spec.mask_fake_negative;
  out["fake_neg_margin"] = spec.fake_neg_margin;
  out["include_qq"] = spec.include_qq;
  out["include_dd"] = spec.include_dd;
  out["temperature"] = spec.temperature;
  out["reduction"] = spec.reduction == Reduction::mean ? "mean" : "sum";
  out["gather"] = spec.gather == GatherPath::object ? "object" : "tensor";
  out["scalar"] = spec.scalar == ScalarType::float64 ? "float64" : "float32";
  out["data_seed"] = spec.data_seed;
  out["rng_seed"] = spec.rng_seed;
  out["compensate"] = spec.compensate;
  out["per_rank_rng"] = spec.per_rank_rng;
  out["idle_steps"] = spec.idle_steps;
  out["record_draws"] = spec.record_draws;
  out["draw_seed"] = spec.draw_seed;
  out["features"] = name_of(spec.features);
  out["schedule_seed"] = spec.schedule_seed;
  out["reduction_order_seed"] = spec.reduction_order_seed;
  return out;
}

Json histogram_json(const ErrorHistogram& histogram) {
  return {{"exact", histogram.exact},
          {"non_finite", histogram.non_finite},
          {"min_exponent", ErrorHistogram::kMinExponent},
          {"bins", histogram.bins}};
}

Json tally_json(const Tally& tally) {
  Json out;
  out["cases_run"] = tally.cases_run;
  out["discarded"] = tally.discarded;
  out["discards_by_reason"] = tally.discards_by_reason;
  if (!tally.declined.empty()) out["declined"] = tally.declined;
  out["property_checks"] = tally.property_checks;
  out["worst_rel_err"] = {{"float64", tally.worst_rel_err}, {"float32", tally.worst_rel_err_float}};
  out["coverage"] = tally.coverage;
  Json histograms = Json::object();
  for (const auto& [scalar, histogram] : tally.error_histogram) {
    histograms[scalar] = histogram_json(histogram);
  }
  out["error_histogram"] = std::move(histograms);
  out["self_checked"] = tally.self_checked;
  return out;
}

Json divergence_json(const std::optional<SelfCheckDivergence>& divergence) {
  if (!divergence) return nullptr;
  return {{"case_index", divergence->case_index}, {"detail", divergence->detail}};
}

Json failure_json(const CampaignReport& report) {
  const CampaignFailure& failure = *report.result.failure;
  Json out;
  out["case_index"] = failure.case_index;
  out["property"] = failure.failures.empty() ? "" : failure.failures.front().property;
  Json failures = Json::array();
  for (const auto& f : failure.failures) {
    failures.push_back({{"property", f.property}, {"detail", f.detail}});
  }
  out["failures"] = std::move(failures);
  out["shrink_steps"] = failure.shrink_steps;
  out["original"] = describe(failure.original);
  out["shrunk"] = describe(failure.shrunk);
  out["original_spec"] = spec_json(failure.original);
  out["shrunk_spec"] = spec_json(failure.shrunk);
  out["case_file"] = report.saved_case.empty() ? Json() : Json(report.saved_case);
  out["reproduce"] = reproduce_commands(report);
  out["case"] = Json::parse(case_to_json(failure.shrunk_case));
  return out;
}

Json ranges_json(const std::vector<IndexRange>& ranges) {
  Json out = Json::array();
  for (const auto& range : ranges) out.push_back({range.begin, range.end});
  return out;
}

const char* stop_name(StopReason reason) {
  switch (reason) {
    case StopReason::cases:
      return "cases";
    case StopReason::time:
      return "time";
    case StopReason::failure:
      return "failure";
    case StopReason::interrupted:
      return "interrupted";
  }
  return "?";
}

// Readable and diffable: objects indented down to kPrettyDepth, arrays of
// numbers on one line, arrays of objects (blocks, failures) one element per line.
constexpr int kPrettyDepth = 3;

void append_laid_out(std::string& text, const Json& value, int depth) {
  const std::string indent(static_cast<std::size_t>(2 * depth), ' ');
  if (value.is_object() && !value.empty() && depth < kPrettyDepth) {
    text += "{\n";
    std::size_t i = 0;
    for (const auto& [key, member] : value.items()) {
      text += indent + "  " + Json(key).dump() + ": ";
      append_laid_out(text, member, depth + 1);
      text += ++i < value.size() ? ",\n" : "\n";
    }
    text += indent + "}";
    return;
  }
  const bool has_objects =
      value.is_array() && std::any_of(value.begin(), value.end(),
                                      [](const Json& element) { return element.is_object(); });
  if (has_objects) {
    text += "[\n";
    for (std::size_t i = 0; i < value.size(); ++i) {
      text += indent + "  " + value[i].dump() + (i + 1 < value.size() ? ",\n" : "\n");
    }
    text += indent + "]";
    return;
  }
  text += value.dump();
}

// ---------------------------------------------------------------------------
// Reading: every access names its key, so a wrong report gives one line.

[[noreturn]] void bad(const std::string& path, const std::string& problem) {
  throw InputError(path + ": " + problem);
}

const Json& member(const Json& object, const std::string& path, const char* key) {
  if (!object.is_object()) bad(path, "expected an object");
  const auto it = object.find(key);
  if (it == object.end()) bad(path + "." + key, "missing required key");
  return *it;
}

std::string join(const std::string& path, const char* key) {
  return path.empty() ? key : path + "." + key;
}

std::int64_t read_int(const Json& value, const std::string& path) {
  if (value.is_number_unsigned() &&
      value.get<std::uint64_t>() >
          static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
    bad(path, "too large");
  }
  if (!value.is_number_integer()) bad(path, "expected an integer");
  return value.get<std::int64_t>();
}

std::int64_t read_count(const Json& value, const std::string& path) {
  const std::int64_t n = read_int(value, path);
  if (n < 0) bad(path, "must be >= 0");
  return n;
}

std::uint64_t read_u64(const Json& value, const std::string& path) {
  if (!value.is_number_unsigned()) bad(path, "expected an integer >= 0");
  return value.get<std::uint64_t>();
}

double read_number(const Json& value, const std::string& path) {
  if (!value.is_number()) bad(path, "expected a number");
  return value.get<double>();
}

bool read_bool(const Json& value, const std::string& path) {
  if (!value.is_boolean()) bad(path, "expected true or false");
  return value.get<bool>();
}

std::string read_string(const Json& value, const std::string& path) {
  if (!value.is_string()) bad(path, "expected a string");
  return value.get<std::string>();
}

std::int32_t read_int32(const Json& value, const std::string& path) {
  const std::int64_t n = read_int(value, path);
  if (n < std::numeric_limits<std::int32_t>::min() ||
      n > std::numeric_limits<std::int32_t>::max()) {
    bad(path, "outside the 32-bit range");
  }
  return static_cast<std::int32_t>(n);
}

template <class Enum>
Enum read_enum(const Json& value, const std::string& path, const char* a, Enum ea, const char* b,
               Enum eb) {
  const std::string text = read_string(value, path);
  if (text == a) return ea;
  if (text == b) return eb;
  bad(path, std::string("expected \"") + a + "\" or \"" + b + "\"");
}

FeatureStyle read_feature_style(const Json& value, const std::string& path) {
  for (const FeatureStyle style :
       {FeatureStyle::normal, FeatureStyle::duplicated, FeatureStyle::threshold_ties,
        FeatureStyle::zero_rows, FeatureStyle::collinear, FeatureStyle::magnitudes}) {
    if (value.is_string() && value.get<std::string>() == name_of(style)) return style;
  }
  bad(path,
      "expected a feature style (normal, duplicated, threshold-ties, zero-rows, collinear, "
      "magnitudes)");
}

CaseSpec read_spec(const Json& value, const std::string& path) {
  CaseSpec spec;
  auto at = [&](const char* key) -> const Json& { return member(value, path, key); };
  auto p = [&](const char* key) { return join(path, key); };
  spec.world = read_int32(at("world"), p("world"));
  spec.dp = read_int32(at("dp"), p("dp"));
  spec.negatives.clear();
  const Json& negatives = at("negatives");
  if (!negatives.is_array()) bad(p("negatives"), "expected an array");
  for (const Json& micro : negatives) {
    auto& shards = spec.negatives.emplace_back();
    if (!micro.is_array()) bad(p("negatives"), "expected arrays of arrays");
    for (const Json& shard : micro) {
      auto& groups = shards.emplace_back();
      if (!shard.is_array()) bad(p("negatives"), "expected arrays of arrays of integers");
      for (const Json& k : shard) groups.push_back(read_int32(k, p("negatives")));
    }
  }
  spec.accumulation_normalize =
      read_bool(at("accumulation_normalize"), p("accumulation_normalize"));
  spec.feature_dim = read_int32(at("feature_dim"), p("feature_dim"));
  spec.embedding_dim = read_int32(at("embedding_dim"), p("embedding_dim"));
  spec.normalize = read_bool(at("normalize"), p("normalize"));
  spec.use_batch = read_bool(at("use_batch"), p("use_batch"));
  spec.hard_negatives = read_int32(at("hard_negatives"), p("hard_negatives"));
  spec.mask_fake_negative = read_bool(at("mask_fake_negative"), p("mask_fake_negative"));
  spec.fake_neg_margin = read_number(at("fake_neg_margin"), p("fake_neg_margin"));
  spec.include_qq = read_bool(at("include_qq"), p("include_qq"));
  spec.include_dd = read_bool(at("include_dd"), p("include_dd"));
  spec.temperature = read_number(at("temperature"), p("temperature"));
  spec.reduction =
      read_enum(at("reduction"), p("reduction"), "mean", Reduction::mean, "sum", Reduction::sum);
  spec.gather = read_enum(at("gather"), p("gather"), "object", GatherPath::object, "tensor",
                          GatherPath::tensor);
  spec.scalar = read_enum(at("scalar"), p("scalar"), "float64", ScalarType::float64, "float32",
                          ScalarType::float32);
  spec.data_seed = read_u64(at("data_seed"), p("data_seed"));
  spec.rng_seed = read_u64(at("rng_seed"), p("rng_seed"));
  spec.compensate = read_bool(at("compensate"), p("compensate"));
  spec.per_rank_rng = read_bool(at("per_rank_rng"), p("per_rank_rng"));
  spec.idle_steps = read_int32(at("idle_steps"), p("idle_steps"));
  spec.record_draws = read_bool(at("record_draws"), p("record_draws"));
  spec.draw_seed = read_u64(at("draw_seed"), p("draw_seed"));
  spec.features = read_feature_style(at("features"), p("features"));
  spec.schedule_seed = read_u64(at("schedule_seed"), p("schedule_seed"));
  spec.reduction_order_seed = read_u64(at("reduction_order_seed"), p("reduction_order_seed"));
  return spec;
}

template <class Map, class ReadValue>
Map read_map(const Json& value, const std::string& path, ReadValue read_value) {
  if (!value.is_object()) bad(path, "expected an object");
  Map out;
  for (const auto& [key, element] : value.items()) {
    out[key] = read_value(element, path + "." + key);
  }
  return out;
}

ErrorHistogram read_histogram(const Json& value, const std::string& path) {
  ErrorHistogram histogram;
  histogram.exact = read_count(member(value, path, "exact"), join(path, "exact"));
  histogram.non_finite = read_count(member(value, path, "non_finite"), join(path, "non_finite"));
  if (read_int(member(value, path, "min_exponent"), join(path, "min_exponent")) !=
      ErrorHistogram::kMinExponent) {
    bad(join(path, "min_exponent"), "expected " + std::to_string(ErrorHistogram::kMinExponent));
  }
  const Json& bins = member(value, path, "bins");
  if (!bins.is_array() || bins.size() != histogram.bins.size()) {
    bad(join(path, "bins"), "expected " + std::to_string(histogram.bins.size()) + " counts");
  }
  for (std::size_t i = 0; i < bins.size(); ++i) {
    histogram.bins[i] = read_count(bins[i], join(path, "bins"));
  }
  return histogram;
}

void read_tally(const Json& value, const std::string& path, Tally& tally) {
  auto at = [&](const char* key) -> const Json& { return member(value, path, key); };
  auto p = [&](const char* key) { return join(path, key); };
  tally.cases_run = read_count(at("cases_run"), p("cases_run"));
  tally.discarded = read_count(at("discarded"), p("discarded"));
  tally.discards_by_reason = read_map<std::map<std::string, std::int64_t>>(
      at("discards_by_reason"), p("discards_by_reason"), read_count);
  if (value.contains("declined")) {
    tally.declined = read_map<std::map<std::string, std::int64_t>>(at("declined"), p("declined"),
                                                                   read_count);
  }
  tally.property_checks = read_map<std::map<std::string, std::int64_t>>(
      at("property_checks"), p("property_checks"), read_count);
  const Json& worst = at("worst_rel_err");
  tally.worst_rel_err =
      read_number(member(worst, p("worst_rel_err"), "float64"), p("worst_rel_err"));
  tally.worst_rel_err_float =
      read_number(member(worst, p("worst_rel_err"), "float32"), p("worst_rel_err"));
  tally.coverage =
      read_map<Coverage>(at("coverage"), p("coverage"), [](const Json& v, const std::string& q) {
        return read_map<Coverage::mapped_type>(v, q, read_count);
      });
  tally.error_histogram = read_map<std::map<std::string, ErrorHistogram>>(
      at("error_histogram"), p("error_histogram"), read_histogram);
  tally.self_checked = read_count(at("self_checked"), p("self_checked"));
}

std::optional<SelfCheckDivergence> read_divergence(const Json& value, const std::string& path) {
  if (value.is_null()) return std::nullopt;
  return SelfCheckDivergence{
      read_count(member(value, path, "case_index"), join(path, "case_index")),
      read_string(member(value, path, "detail"), join(path, "detail"))};
}

std::vector<IndexRange> read_ranges(const Json& value, const std::string& path) {
  if (!value.is_array()) bad(path, "expected an array of [begin, end] pairs");
  std::vector<IndexRange> ranges;
  for (const Json& pair : value) {
    if (!pair.is_array() || pair.size() != 2) bad(path, "expected [begin, end] pairs");
    ranges.push_back({read_count(pair[0], path), read_count(pair[1], path)});
  }
  return ranges;
}

void read_failure(const Json& value, CampaignReport& report) {
  const std::string path = "failure";
  auto at = [&](const char* key) -> const Json& { return member(value, path, key); };
  auto p = [&](const char* key) { return join(path, key); };
  CampaignFailure failure;
  failure.case_index = read_count(at("case_index"), p("case_index"));
  const Json& failures = at("failures");
  if (!failures.is_array() || failures.empty()) bad(p("failures"), "expected a non-empty array");
  for (const Json& f : failures) {
    failure.failures.push_back({read_string(member(f, p("failures"), "property"), p("failures")),
                                read_string(member(f, p("failures"), "detail"), p("failures"))});
  }
  failure.shrink_steps = read_int32(at("shrink_steps"), p("shrink_steps"));
  failure.original = read_spec(at("original_spec"), p("original_spec"));
  failure.shrunk = read_spec(at("shrunk_spec"), p("shrunk_spec"));
  try {
    failure.shrunk_case = build_case(failure.shrunk);
    failure.shrunk_case.found = parse_case(at("case").dump()).found;
  } catch (const InputError& e) {
    bad(p("case"), e.what());
  }
  const Json& file = at("case_file");
  report.saved_case = file.is_null() ? "" : read_string(file, p("case_file"));
  report.result.failure = std::move(failure);
}

std::vector<BlockRecord> read_blocks(const Json& value) {
  if (!value.is_array()) bad("blocks", "expected an array");
  std::vector<BlockRecord> blocks;
  for (std::size_t i = 0; i < value.size(); ++i) {
    const std::string path = "blocks[" + std::to_string(i) + "]";
    BlockRecord block;
    block.block = read_count(member(value[i], path, "block"), join(path, "block"));
    read_tally(member(value[i], path, "tally"), join(path, "tally"), block.tally);
    const Json& failure = member(value[i], path, "failure_index");
    if (!failure.is_null()) block.failure_index = read_count(failure, join(path, "failure_index"));
    block.divergence =
        read_divergence(member(value[i], path, "divergence"), join(path, "divergence"));
    if (block.tally.cases_run > kBlockCases) bad(path, "more cases than a block holds");
    blocks.push_back(std::move(block));
  }
  return blocks;
}

Json block_json(const BlockRecord& block) {
  return {{"block", block.block},
          {"tally", tally_json(block.tally)},
          {"failure_index", block.failure_index ? Json(*block.failure_index) : Json()},
          {"divergence", divergence_json(block.divergence)}};
}

StopReason stop_reason_named(const std::string& name) {
  for (const StopReason reason :
       {StopReason::cases, StopReason::time, StopReason::failure, StopReason::interrupted}) {
    if (name == stop_name(reason)) return reason;
  }
  bad("stopped_by", "expected cases, time, failure or interrupted");
}

// ---------------------------------------------------------------------------
// Merging

void require_same(const CampaignReport& a, const CampaignReport& b) {
  auto differ = [](const std::string& what) {
    throw InputError("merge: the reports come from different campaigns (" + what + " differs)");
  };
  if (a.seed != b.seed) differ("seed");
  if (a.mutant != b.mutant) differ("mutant");
  if (a.limits != b.limits) differ("limits");
  if (a.case_budget != b.case_budget) differ("case budget");
  if (a.time_budget != b.time_budget) differ("time budget");
  if (a.self_check != b.self_check) differ("self-check");
  if (a.shards.count != b.shards.count) differ("shard count");
  if (a.sut_command != b.sut_command || a.sut_name != b.sut_name) differ("SUT");
}

}  // namespace

std::vector<std::pair<std::string, std::int64_t>> coverage_in_reading_order(
    const Coverage::mapped_type& values) {
  std::vector<std::pair<std::string, std::int64_t>> ordered(values.begin(), values.end());
  // (is a word, first number): numbers first, by value; the map's name order
  // is kept among words and among equal numbers (stable sort).
  auto key = [](const std::string& value) {
    char* end = nullptr;
    const double n = std::strtod(value.c_str(), &end);
    const bool word = end == value.c_str();
    return std::pair<bool, double>{word, word ? 0.0 : n};
  };
  std::stable_sort(ordered.begin(), ordered.end(),
                   [&](const auto& a, const auto& b) { return key(a.first) < key(b.first); });
  return ordered;
}

std::string spec_to_json_text(const CaseSpec& spec) {
  return spec_json(spec).dump();
}

std::string shell_word(std::string_view text) {
  const bool plain = !text.empty() && std::all_of(text.begin(), text.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '.' || ch == '/' ||
           ch == '-' || ch == ':' || ch == '+' || ch == '=';
  });
  if (plain) return std::string(text);
  std::string quoted = "'";
  for (const char ch : text) quoted += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return quoted + "'";
}

std::vector<std::string> reproduce_commands(const CampaignReport& report) {
  std::vector<std::string> commands;
  if (!report.result.failure) return commands;
  std::string replay = shell_word(report.program) + " replay --seed " +
                       std::to_string(report.seed) + " --case-index " +
                       std::to_string(report.result.failure->case_index);
  if (!report.mutant.empty()) replay += " --mutant " + report.mutant;
  if (report.limits != "default") replay += " --limits " + report.limits;
  std::string sut;
  if (!report.sut_command.empty()) sut = " --sut " + shell_word(report.sut_command);
  if (!report.sut_timeout.empty()) sut += " --sut-timeout " + shell_word(report.sut_timeout);
  for (const std::string& option : report.restrict_options) {
    replay += " --restrict " + shell_word(option);
  }
  replay += sut;
  // The replay saves the case where the campaign did: the same file, the same output.
  const std::string saved_dir = std::filesystem::path(report.saved_case).parent_path().string();
  if (report.saved_case.empty()) {
    replay += " --no-corpus";
  } else if (saved_dir != kDefaultCorpusFoundDir) {
    replay += " --corpus-dir " + shell_word(saved_dir);
  }
  commands.push_back(replay);
  if (!report.saved_case.empty())
    commands.push_back(shell_word(report.program) + " replay " + shell_word(report.saved_case) + sut);
  return commands;
}

std::pair<std::string, std::int64_t> commonest_discard(const Tally& tally) {
  std::pair<std::string, std::int64_t> commonest{"", 0};
  for (const auto& [reason, count] : tally.discards_by_reason) {
    if (count > commonest.second) commonest = {reason, count};
  }
  return commonest;
}

std::optional<std::string> CampaignReport::discard_budget_failure() const {
  const Tally& tally = result;
  if (tally.cases_run < kDiscardBudgetMinCases) return std::nullopt;
  // A case the SUT declined is the SUT's choice, reported apart: the budget is for cases the
  // reference rejected.
  std::int64_t declined = 0;
  for (const auto& [reason, count] : tally.declined) declined += count;
  const double share =
      static_cast<double>(tally.discarded - declined) / static_cast<double>(tally.cases_run);
  if (share <= kMaxDiscardShare) return std::nullopt;
  const auto [reason, count] = commonest_discard(tally);
  char text[160];
  std::snprintf(text, sizeof text, "%.1f%% of %lld cases discarded (budget %.0f%%)", 100 * share,
                static_cast<long long>(tally.cases_run), 100 * kMaxDiscardShare);
  return "DISCARD BUDGET EXCEEDED: " + std::string(text) + "; commonest reason (" +
         std::to_string(count) + "): " + reason;
}

std::string report_to_json(const CampaignReport& report) {
  const CampaignResult& r = report.result;
  Json out;
  out["format"] = kReportFormat;
  out["seed"] = report.seed;
  out["seed_source"] = report.seed_source.empty() ? Json() : Json(report.seed_source);
  out["mutant"] = report.mutant.empty() ? Json() : Json(report.mutant);
  out["limits"] = report.limits;
  out["budget"] = {{"cases", report.case_budget ? Json(*report.case_budget) : Json()},
                   {"time", report.time_budget.empty() ? Json() : Json(report.time_budget)}};
  out["shards"] = {{"count", report.shards.count}, {"indices", report.shards.indices}};
  out["block_cases"] = kBlockCases;
  out["self_check"] = report.self_check;
  const std::optional<std::string> discards = report.discard_budget_failure();
  out["result"] = r.failure      ? "failed"
                  : r.divergence ? "self-check-diverged"
                  : discards     ? "discard-budget-exceeded"
                                 : "passed";
  out["stopped_by"] = stop_name(r.stopped_by);
  // Derived from the tally (not read back): the bound and, when the share
  // exceeds it, the line the text report ends with.
  out["discard_budget"] = {{"max_share", kMaxDiscardShare},
                           {"min_cases", kDiscardBudgetMinCases},
                           {"exceeded", discards ? Json(*discards) : Json()}};
  out["covered"] = ranges_json(r.covered);
  out["tally"] = tally_json(r);
  out["divergence"] = divergence_json(r.divergence);
  out["failure"] = r.failure ? failure_json(report) : Json();
  if (!report.sut_command.empty()) {  // only with --sut: other reports keep their bytes
    out["sut"] = {{"command", report.sut_command},
                  {"name", report.sut_name},
                  {"timeout", report.sut_timeout.empty() ? Json() : Json(report.sut_timeout)},
                  {"restricted_axes", report.restricted_axes},
                  {"restrict", report.restrict_options}};
  }
  if (!report.shards.whole()) {
    Json blocks = Json::array();
    for (const BlockRecord& block : r.blocks) blocks.push_back(block_json(block));
    out["blocks"] = std::move(blocks);
  }
  std::string text;
  append_laid_out(text, out, 0);
  return text + "\n";
}

CampaignReport report_from_json(std::string_view text) {
  Json document;
  try {
    document = Json::parse(text.begin(), text.end());
  } catch (const Json::exception& e) {
    std::string message = e.what();
    if (const auto at = message.find("] "); at != message.npos) message.erase(0, at + 2);
    throw InputError("(top level): invalid JSON: " + message);
  }
  if (!document.is_object()) bad("(top level)", "expected an object");
  auto at = [&](const char* key) -> const Json& { return member(document, "", key); };
  const Json& format = at("format");
  if (!format.is_string() || format.get<std::string>() != kReportFormat) {
    bad("format", "expected \"" + std::string(kReportFormat) +
                      "\" (a report written by check --format json)");
  }
  if (read_int(at("block_cases"), "block_cases") != kBlockCases) {
    bad("block_cases", "expected " + std::to_string(kBlockCases));
  }
  CampaignReport report;
  report.seed = read_u64(at("seed"), "seed");
  if (!at("seed_source").is_null())
    report.seed_source = read_string(at("seed_source"), "seed_source");
  if (!at("mutant").is_null()) report.mutant = read_string(at("mutant"), "mutant");
  report.limits = read_string(at("limits"), "limits");
  const Json& budget = at("budget");
  const Json& cases = member(budget, "budget", "cases");
  if (!cases.is_null()) report.case_budget = read_count(cases, "budget.cases");
  const Json& time = member(budget, "budget", "time");
  if (!time.is_null()) report.time_budget = read_string(time, "budget.time");
  const Json& shards = at("shards");
  report.shards.count = read_count(member(shards, "shards", "count"), "shards.count");
  const Json& indices = member(shards, "shards", "indices");
  if (!indices.is_array() || indices.empty()) bad("shards.indices", "expected a non-empty array");
  report.shards.indices.clear();
  for (const Json& i : indices) {
    const std::int64_t index = read_count(i, "shards.indices");
    if (index >= report.shards.count) bad("shards.indices", "index beyond shards.count");
    report.shards.indices.push_back(index);
  }
  if (report.shards.count < 1) bad("shards.count", "must be >= 1");
  report.self_check = read_bool(at("self_check"), "self_check");
  report.result.stopped_by = stop_reason_named(read_string(at("stopped_by"), "stopped_by"));
  report.result.covered = read_ranges(at("covered"), "covered");
  read_tally(at("tally"), "tally", report.result);
  report.result.divergence = read_divergence(at("divergence"), "divergence");
  if (!at("failure").is_null()) read_failure(at("failure"), report);
  if (const auto sut = document.find("sut"); sut != document.end()) {
    report.sut_command = read_string(member(*sut, "sut", "command"), "sut.command");
    report.sut_name = read_string(member(*sut, "sut", "name"), "sut.name");
    const Json& timeout = member(*sut, "sut", "timeout");
    if (!timeout.is_null()) report.sut_timeout = read_string(timeout, "sut.timeout");
    const Json& axes = member(*sut, "sut", "restricted_axes");
    if (!axes.is_array()) bad("sut.restricted_axes", "expected an array of strings");
    for (const Json& axis : axes) {
      report.restricted_axes.push_back(read_string(axis, "sut.restricted_axes"));
    }
    const Json& restrict = member(*sut, "sut", "restrict");
    if (!restrict.is_array()) bad("sut.restrict", "expected an array of strings");
    for (const Json& option : restrict) {
      report.restrict_options.push_back(read_string(option, "sut.restrict"));
    }
  }
  if (!report.shards.whole()) {
    report.result.blocks = read_blocks(at("blocks"));
    const auto& indices = report.shards.indices;
    for (std::size_t i = 0; i < report.result.blocks.size(); ++i) {
      const std::int64_t shard = shard_of_block(report.result.blocks[i].block, report.shards.count);
      if (std::find(indices.begin(), indices.end(), shard) == indices.end()) {
        bad("blocks[" + std::to_string(i) + "].block", "belongs to none of the report's shards");
      }
      if (i > 0 && report.result.blocks[i].block <= report.result.blocks[i - 1].block) {
        bad("blocks[" + std::to_string(i) + "].block", "blocks must be in increasing order");
      }
    }
  }
  return report;
}

CampaignReport merge_reports(const std::vector<CampaignReport>& reports) {
  if (reports.empty()) throw InputError("merge: no report given");
  if (reports.size() == 1) return reports.front();
  const CampaignReport& first = reports.front();
  std::set<std::int64_t> indices;
  for (const CampaignReport& report : reports) {
    require_same(first, report);
    if (report.shards.whole()) {
      throw InputError("merge: a report of the whole seed space (no --shard) merges with nothing");
    }
    for (const std::int64_t i : report.shards.indices) {
      if (!indices.insert(i).second) {
        throw InputError("merge: shard " + std::to_string(i) + "/" +
                         std::to_string(first.shards.count) + " is in two reports");
      }
    }
  }
  // The smallest failing index of any shard ends the merged campaign there.
  const CampaignReport* failing = nullptr;
  for (const CampaignReport& report : reports) {
    if (report.result.failure && (failing == nullptr || report.result.failure->case_index <
                                                            failing->result.failure->case_index)) {
      failing = &report;
    }
  }
  std::vector<BlockRecord> blocks;
  for (const CampaignReport& report : reports) {
    for (const BlockRecord& block : report.result.blocks) {
      if (failing == nullptr || block.first_index() <= failing->result.failure->case_index) {
        blocks.push_back(block);
      }
    }
  }
  std::sort(blocks.begin(), blocks.end(),
            [](const BlockRecord& a, const BlockRecord& b) { return a.block < b.block; });
  CampaignReport merged = first;
  merged.result = CampaignResult{};
  merged.saved_case.clear();
  for (const BlockRecord& block : blocks) {
    merged.result.merge(block.tally);
    if (block.divergence && !merged.result.divergence) merged.result.divergence = block.divergence;
  }
  merged.result.covered = covered_ranges(blocks);
  merged.result.blocks = std::move(blocks);
  if (failing != nullptr) {
    merged.result.failure = failing->result.failure;
    merged.result.stopped_by = StopReason::failure;
    merged.saved_case = failing->saved_case;
  } else {
    auto any = [&](StopReason reason) {
      return std::any_of(reports.begin(), reports.end(),
                         [&](const CampaignReport& r) { return r.result.stopped_by == reason; });
    };
    merged.result.stopped_by = any(StopReason::interrupted) ? StopReason::interrupted
                               : any(StopReason::time)      ? StopReason::time
                                                            : StopReason::cases;
  }
  merged.shards.indices.assign(indices.begin(), indices.end());
  if (static_cast<std::int64_t>(indices.size()) == first.shards.count) {
    merged.shards = ShardSet{};
    merged.result.blocks.clear();
  }
  return merged;
}

}  // namespace infonce::properties
