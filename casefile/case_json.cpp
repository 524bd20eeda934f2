#include "casefile/case_json.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <set>
#include <span>
#include <sstream>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "casefile/case_checks.hpp"

namespace infonce {
namespace {

using Json = nlohmann::json;
// Writing keeps keys in the order they are inserted: the SPEC's order.
using OrderedJson = nlohmann::ordered_json;
using case_checks::fail;
using case_checks::index_path;

constexpr std::string_view kFormat = "infonce-case/1";
// A case nests six levels deep (root, batches[m][d][g][row][j]); anything far
// deeper is rejected while parsing, before it costs memory.
constexpr int kMaxJsonDepth = 64;
// Generous: kMaxNumbers features at ~25 bytes each.
constexpr std::uintmax_t kMaxCaseFileBytes = std::uintmax_t{1} << 31;
constexpr std::size_t kMaxEchoedChars = 40;

// ---------------------------------------------------------------------------
// Paths and descriptions for one-line messages.

bool is_plain_key(std::string_view key) {
  return !key.empty() && std::all_of(key.begin(), key.end(), [](char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '_' || ch == '-';
  });
}

// A JSON string literal with every non-ASCII or control character escaped,
// cut to kMaxEchoedChars, so a message stays on one printable line.
std::string json_quoted(std::string_view text) {
  std::string cut(text.substr(0, kMaxEchoedChars));
  std::string result =
      Json(cut).dump(-1, ' ', /*ensure_ascii=*/true, Json::error_handler_t::replace);
  if (text.size() > kMaxEchoedChars) result += "...";
  return result;
}

// "loss" + "temperature" -> "loss.temperature"; odd keys are quoted: loss["a b"].
std::string key_path(std::string_view parent, std::string_view key) {
  if (!is_plain_key(key)) return std::string(parent) + "[" + json_quoted(key) + "]";
  if (parent.empty()) return std::string(key);
  return std::string(parent) + "." + std::string(key);
}

std::string shown_path(std::string_view path) {
  return path.empty() ? std::string("(top level)") : std::string(path);
}

// The shortest text that reads back to the same double ("0.1", not
// "0.10000000000000001"); "inf" for infinity.
std::string number_text(double value) {
  char buffer[32];
  const auto end = std::to_chars(buffer, buffer + sizeof buffer, value).ptr;
  return std::string(buffer, end);
}

std::string count_text(std::size_t count) {
  return std::to_string(count);
}

// What a value is, for "expected X, got Y".
std::string describe(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::boolean:
      return value.get<bool>() ? "true" : "false";
    case Json::value_t::string:
      return "the string " + json_quoted(value.get_ref<const std::string&>());
    case Json::value_t::number_integer:
      return std::to_string(value.get<std::int64_t>());
    case Json::value_t::number_unsigned:
      return std::to_string(value.get<std::uint64_t>());
    case Json::value_t::number_float:
      // dump() keeps "2.0" a float to the eye; it would print inf as null.
      return std::isfinite(value.get<double>()) ? value.dump() : number_text(value.get<double>());
    case Json::value_t::array:
      return "an array of " + count_text(value.size());
    case Json::value_t::object:
      return "an object";
    default:
      return value.type_name();
  }
}

[[noreturn]] void fail_type(std::string_view path, std::string_view expected, const Json& value) {
  fail(shown_path(path), "expected " + std::string(expected) + ", got " + describe(value));
}

// ---------------------------------------------------------------------------
// Parsing with a position: where a syntax error happened, duplicate keys,
// nesting depth. nlohmann reports only line and column and keeps the last of
// duplicate keys silently; a case file must not say two things at once.

class ParsePosition {
 public:
  // Built only for a message, from the key or index of every open container:
  // building it at each event cost the length of the keys on the way down per
  // event, quadratic in the file (one long key over many arrays took minutes).
  std::string current_path() const {
    std::string path;
    for (const Frame& frame : frames_) {
      if (!frame.is_object) {
        path = index_path(path, frame.count);
      } else if (frame.key) {
        path = key_path(path, *frame.key);
      }
    }
    return path;
  }

  bool on_event(int depth, nlohmann::detail::parse_event_t event, const Json& parsed) {
    using Event = nlohmann::detail::parse_event_t;
    switch (event) {
      case Event::object_start:
      case Event::array_start:
        if (depth > kMaxJsonDepth) {
          fail(shown_path(current_path()),
               "JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
        }
        frames_.push_back(Frame{event == Event::object_start, {}, 0, {}});
        break;
      case Event::key: {
        Frame& top = frames_.back();
        const auto& key = parsed.get_ref<const std::string&>();
        top.key = key;
        if (!top.keys.insert(key).second) fail(current_path(), "duplicate key");
        break;
      }
      case Event::object_end:
      case Event::array_end:
        frames_.pop_back();
        count_element();
        break;
      case Event::value:
        count_element();
        break;
    }
    return true;
  }

 private:
  struct Frame {
    bool is_object = false;
    std::optional<std::string> key;
    std::int64_t count = 0;  // arrays: elements completed
    std::set<std::string> keys;
  };

  void count_element() {
    if (!frames_.empty() && !frames_.back().is_object) ++frames_.back().count;
  }

  std::vector<Frame> frames_;
};

// nlohmann's message minus its "[json.exception.parse_error.101] " tag, on one line.
std::string syntax_error_text(const Json::exception& error) {
  std::string text = error.what();
  if (const auto tag_end = text.find("] "); text.starts_with("[json.") && tag_end != text.npos) {
    text.erase(0, tag_end + 2);
  }
  // The token echoed back may hold control or invalid UTF-8 bytes.
  for (char& ch : text) {
    const auto byte = static_cast<unsigned char>(ch);
    if (byte < 0x20) ch = ' ';
    if (byte >= 0x7f) ch = '?';
  }
  constexpr std::size_t kMaxLength = 200;
  if (text.size() > kMaxLength) text = text.substr(0, kMaxLength) + "...";
  return text;
}

Json parse_json(std::string_view text) {
  ParsePosition position;
  const Json::parser_callback_t callback =
      [&position](int depth, nlohmann::detail::parse_event_t event, Json& parsed) {
        return position.on_event(depth, event, parsed);
      };
  try {
    return Json::parse(text.begin(), text.end(), callback, /*allow_exceptions=*/true,
                       /*ignore_comments=*/false);
  } catch (const Json::parse_error& error) {
    fail(shown_path(position.current_path()), "invalid JSON: " + syntax_error_text(error));
  } catch (const Json::out_of_range& error) {
    // nlohmann refuses a literal beyond the double range (1e999) with
    // "number overflow parsing '1e999'" instead of reading inf.
    fail(shown_path(position.current_path()),
         "expected a finite number: " + syntax_error_text(error));
  }
}

// ---------------------------------------------------------------------------
// Typed readers. Each names the path it reads.

// An object whose keys must all be known; required keys are fetched by name.
class ObjectReader {
 public:
  ObjectReader(const Json& value, std::string path, std::initializer_list<std::string_view> known)
      : ObjectReader(value, std::move(path), std::span(known.begin(), known.size())) {}
  ObjectReader(const Json& value, std::string path, std::span<const std::string_view> known)
      : value_(value), path_(std::move(path)) {
    if (!value.is_object()) fail_type(path_, "an object", value);
    for (const auto& [key, member] : value.items()) {
      if (std::find(known.begin(), known.end(), key) == known.end()) {
        fail(key_path(path_, key), "unknown key");
      }
    }
  }

  const Json& required(std::string_view key) const {
    const Json* member = optional(key);
    if (member == nullptr) fail(path(key), "missing required key");
    return *member;
  }

  // nullptr when absent.
  const Json* optional(std::string_view key) const {
    const auto it = value_.find(key);
    return it == value_.end() ? nullptr : &*it;
  }

  std::string path(std::string_view key) const { return key_path(path_, key); }

 private:
  const Json& value_;
  std::string path_;
};

bool read_bool(const Json& value, std::string_view path) {
  if (!value.is_boolean()) fail_type(path, "true or false", value);
  return value.get<bool>();
}

// The names of the case file's other choices; the strategy's and the
// reduction's are casefile/strategy_value.hpp's.
constexpr std::array<EnumName<GatherPath>, 2> kGatherPathNames{{
    {GatherPath::object, "object"},
    {GatherPath::tensor, "tensor"},
}};
constexpr std::array<EnumName<loss::Padding>, 2> kPaddingNames{{
    {loss::Padding::legacy, "legacy"},
    {loss::Padding::fixed, "fixed"},
}};
constexpr std::array<EnumName<RngMode>, 2> kRngModeNames{{
    {RngMode::synced, "synced"},
    {RngMode::per_rank, "per-rank"},
}};
enum class LossFamily { infonce, clip, ntxent, siglip };
constexpr std::array<EnumName<LossFamily>, 4> kLossFamilyNames{{
    {LossFamily::infonce, "infonce"},
    {LossFamily::clip, "clip"},
    {LossFamily::ntxent, "ntxent"},
    {LossFamily::siglip, "siglip"},
}};
constexpr std::array<EnumName<ScalarType>, 2> kScalarTypeNames{{
    {ScalarType::float64, "float64"},
    {ScalarType::float32, "float32"},
}};
constexpr std::array<EnumName<std::string_view>, 2> kLimitsNames{{
    {"default", "default"},
    {"typical", "typical"},
}};

template <class Enum, std::size_t N>
Enum read_choice(const Json& value, std::string_view path,
                 const std::array<EnumName<Enum>, N>& choices) {
  std::string expected;
  for (const auto& [choice, name] : choices) {
    if (value.is_string() && value.get_ref<const std::string&>() == name) return choice;
    expected += (expected.empty() ? "" : " or ") + std::string("\"") + std::string(name) + "\"";
  }
  fail_type(path, expected, value);
}

std::int64_t read_int64(const Json& value, std::string_view path) {
  if (value.is_number_unsigned()) {
    const auto unsigned_value = value.get<std::uint64_t>();
    if (unsigned_value > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      fail(shown_path(path), std::to_string(unsigned_value) + " is too large");
    }
    return static_cast<std::int64_t>(unsigned_value);
  }
  if (value.is_number_integer()) return value.get<std::int64_t>();
  fail_type(path, "an integer", value);
}

// Range checks proper belong to case_checks; this only keeps the value
// representable, naming the same key.
std::int32_t read_int32(const Json& value, std::string_view path) {
  const std::int64_t wide = read_int64(value, path);
  if (wide < std::numeric_limits<std::int32_t>::min() ||
      wide > std::numeric_limits<std::int32_t>::max()) {
    fail(shown_path(path), std::to_string(wide) + " is outside the 32-bit integer range");
  }
  return static_cast<std::int32_t>(wide);
}

std::uint64_t read_uint64(const Json& value, std::string_view path) {
  if (value.is_number_unsigned()) return value.get<std::uint64_t>();
  if (value.is_number_integer()) {
    fail(shown_path(path), "must be >= 0, got " + describe(value));
  }
  fail_type(path, "an integer in [0, 2^64)", value);
}

// Any JSON number; integers are converted. 1e999 parses as inf: rejected.
double read_double(const Json& value, std::string_view path) {
  if (!value.is_number()) fail_type(path, "a number", value);
  const double number = value.get<double>();
  if (!std::isfinite(number)) {
    fail(shown_path(path), "expected a finite number, got " + number_text(number) +
                               " (a literal beyond the double range)");
  }
  return number;
}

const Json& read_array(const Json& value, std::string_view path) {
  if (!value.is_array()) fail_type(path, "an array", value);
  return value;
}

// An array of exactly `expected` elements; `what` names them, e.g. "DP shards (mesh.dp)".
const Json& read_array_of(const Json& value, std::string_view path, std::size_t expected,
                          std::string_view what) {
  read_array(value, path);
  if (value.size() != expected) {
    fail(shown_path(path), "expected " + count_text(expected) + " " + std::string(what) + ", got " +
                               count_text(value.size()));
  }
  return value;
}

// Writes the numbers of `row_value` (an array of `columns` numbers) into `row`.
template <class Row>
void read_number_row(const Json& row_value, const std::string& path, std::size_t columns,
                     std::string_view what, Row&& row) {
  read_array_of(row_value, path, columns, what);
  for (std::size_t j = 0; j < columns; ++j) {
    row(static_cast<Eigen::Index>(j)) =
        read_double(row_value[j], index_path(path, static_cast<std::int64_t>(j)));
  }
}

// A D x F matrix; F is the length of row 0 unless given.
Matrix<double> read_matrix(const Json& value, const std::string& path,
                           std::optional<std::size_t> rows, std::optional<std::size_t> columns) {
  read_array(value, path);
  if (rows && value.size() != *rows) {
    fail(path, "expected " + count_text(*rows) + " rows (D, the rows of encoder.weight), got " +
                   count_text(value.size()));
  }
  if (value.empty()) fail(path, "expected at least 1 row");
  if (!columns) columns = read_array(value[0], index_path(path, 0)).size();
  const std::string what =
      "numbers (F" + std::string(path == "encoder.weight" ? ", the length of encoder.weight[0])"
                                                          : ", the columns of encoder.weight)");
  Matrix<double> matrix(static_cast<Eigen::Index>(value.size()),
                        static_cast<Eigen::Index>(*columns));
  for (std::size_t r = 0; r < value.size(); ++r) {
    read_number_row(value[r], index_path(path, static_cast<std::int64_t>(r)), *columns, what,
                    matrix.row(static_cast<Eigen::Index>(r)));
  }
  return matrix;
}

// ---------------------------------------------------------------------------
// The parts of a case, in the order the checks need them.

void read_format(const ObjectReader& root) {
  const Json& format = root.required("format");
  if (!format.is_string() || format.get_ref<const std::string&>() != kFormat) {
    fail_type("format", "\"" + std::string(kFormat) + "\"", format);
  }
}

Mesh read_mesh(const Json& value) {
  const ObjectReader mesh(value, "mesh", {"world", "dp"});
  Mesh result;
  result.world = read_int32(mesh.required("world"), mesh.path("world"));
  result.dp = read_int32(mesh.required("dp"), mesh.path("dp"));
  case_checks::check_mesh(result);
  return result;
}

loss::LossSettings read_loss_settings(const Json& value) {
  const ObjectReader loss(value, "loss",
                          {"temperature", "use_batch", "hard_negatives", "padding",
                           "mask_fake_negative", "fake_neg_margin", "include_qq", "include_dd"});
  loss::LossSettings settings;
  settings.temperature = read_double(loss.required("temperature"), loss.path("temperature"));
  settings.use_batch = read_bool(loss.required("use_batch"), loss.path("use_batch"));
  if (const Json& hard = loss.required("hard_negatives"); !hard.is_null()) {
    if (!hard.is_number_integer()) {
      fail_type(loss.path("hard_negatives"), "null or an integer >= 1", hard);
    }
    settings.hard_negatives = read_int32(hard, loss.path("hard_negatives"));
  }
  settings.padding = read_choice(loss.required("padding"), loss.path("padding"), kPaddingNames);
  settings.mask_fake_negative =
      read_bool(loss.required("mask_fake_negative"), loss.path("mask_fake_negative"));
  settings.fake_neg_margin =
      read_double(loss.required("fake_neg_margin"), loss.path("fake_neg_margin"));
  settings.include_qq = read_bool(loss.required("include_qq"), loss.path("include_qq"));
  settings.include_dd = read_bool(loss.required("include_dd"), loss.path("include_dd"));
  case_checks::check_loss_settings(settings);
  return settings;
}

// encoder.weight: D x F, sizes checked before the matrix is allocated.
Matrix<double> read_encoder_weight(const Json& weight) {
  read_array(weight, "encoder.weight");
  if (weight.size() > static_cast<std::size_t>(CaseLimits::kMaxDim)) {
    fail("encoder.weight", count_text(weight.size()) + " rows (D), above the limit " +
                               std::to_string(CaseLimits::kMaxDim));
  }
  if (!weight.empty() && weight[0].is_array() &&
      weight[0].size() > static_cast<std::size_t>(CaseLimits::kMaxDim)) {
    fail("encoder.weight[0]", count_text(weight[0].size()) + " numbers (F), above the limit " +
                                  std::to_string(CaseLimits::kMaxDim));
  }
  if (!weight.empty() && weight[0].is_array() && weight[0].empty()) {
    fail("encoder.weight[0]", "expected at least 1 number (F >= 1)");
  }
  Matrix<double> out = read_matrix(weight, "encoder.weight", std::nullopt, std::nullopt);
  case_checks::check_weight(out);
  return out;
}

void read_encoder(const Json& value, Case& c) {
  const ObjectReader encoder(value, "encoder", {"normalize", "weight"});
  c.encoder_normalize = read_bool(encoder.required("normalize"), encoder.path("normalize"));
  c.weight = read_encoder_weight(encoder.required("weight"));
}

void read_accumulation(const Json& value, Case& c) {
  const ObjectReader accumulation(value, "accumulation", {"steps", "normalize", "window"});
  c.accumulation_steps = read_int32(accumulation.required("steps"), accumulation.path("steps"));
  c.accumulation_normalize =
      read_bool(accumulation.required("normalize"), accumulation.path("normalize"));
  case_checks::check_accumulation_steps(c.accumulation_steps);
  if (const Json* window = accumulation.optional("window")) {
    c.accumulation_window = read_int32(*window, accumulation.path("window"));
  }
  case_checks::check_accumulation_window(c);
}

void read_rng(const Json& value, Case& c) {
  const ObjectReader rng(value, "rng", {"mode", "seed"});
  c.rng_mode = read_choice(rng.required("mode"), rng.path("mode"), kRngModeNames);
  c.rng_seed = read_uint64(rng.required("seed"), rng.path("seed"));
}

// One DP shard's groups: [group][row][F] -> features stacked, k_g = rows - 2.
loss::ShardBatch read_shard(const Json& value, const std::string& path, std::size_t feature_dim,
                            std::int64_t& numbers_in_case) {
  read_array(value, path);
  if (value.size() > static_cast<std::size_t>(CaseLimits::kMaxGroupsPerShard)) {
    fail(path, count_text(value.size()) + " groups, above the limit " +
                   std::to_string(CaseLimits::kMaxGroupsPerShard));
  }
  loss::ShardBatch shard;
  std::size_t rows = 0;
  for (std::size_t g = 0; g < value.size(); ++g) {
    const std::string group_path = index_path(path, static_cast<std::int64_t>(g));
    const Json& group = read_array(value[g], group_path);
    if (group.size() < 2) {
      fail(group_path, "a group needs at least 2 rows (q, p), got " + count_text(group.size()));
    }
    if (group.size() > static_cast<std::size_t>(CaseLimits::kMaxNegatives) + 2) {
      fail(group_path, count_text(group.size() - 2) + " negatives, above the limit " +
                           std::to_string(CaseLimits::kMaxNegatives));
    }
    shard.negative_counts.push_back(static_cast<std::int32_t>(group.size()) - 2);
    rows += group.size();
  }
  numbers_in_case += static_cast<std::int64_t>(rows * feature_dim);
  if (numbers_in_case > CaseLimits::kMaxNumbers) {
    fail(path, "the case holds more than " + std::to_string(CaseLimits::kMaxNumbers) +
                   " feature numbers (the limit)");
  }
  shard.features.resize(static_cast<Eigen::Index>(rows), static_cast<Eigen::Index>(feature_dim));
  Eigen::Index row = 0;
  for (std::size_t g = 0; g < value.size(); ++g) {
    const std::string group_path = index_path(path, static_cast<std::int64_t>(g));
    for (std::size_t i = 0; i < value[g].size(); ++i, ++row) {
      read_number_row(value[g][i], index_path(group_path, static_cast<std::int64_t>(i)),
                      feature_dim, "numbers (F)", shard.features.row(row));
    }
  }
  return shard;
}

void read_batches(const Json& value, Case& c) {
  read_array_of(value, "batches", static_cast<std::size_t>(c.accumulation_steps),
                "micro-steps (accumulation.steps)");
  std::int64_t numbers_in_case = 0;
  for (std::size_t m = 0; m < value.size(); ++m) {
    const std::string micro_path = index_path("batches", static_cast<std::int64_t>(m));
    read_array_of(value[m], micro_path, static_cast<std::size_t>(c.mesh.dp), "DP shards (mesh.dp)");
    std::vector<loss::ShardBatch>& shards = c.batches.emplace_back();
    for (std::size_t d = 0; d < value[m].size(); ++d) {
      shards.push_back(read_shard(value[m][d], index_path(micro_path, static_cast<std::int64_t>(d)),
                                  static_cast<std::size_t>(c.feature_dim()), numbers_in_case));
    }
  }
}

void read_padding_draws(const Json& value, Case& c) {
  read_array_of(value, "padding_draws", static_cast<std::size_t>(c.accumulation_steps),
                "micro-steps (accumulation.steps)");
  loss::RecordedDraws draws;
  for (std::size_t m = 0; m < value.size(); ++m) {
    const std::string micro_path = index_path("padding_draws", static_cast<std::int64_t>(m));
    read_array_of(value[m], micro_path, static_cast<std::size_t>(c.mesh.dp), "DP shards (mesh.dp)");
    auto& micro = draws.emplace_back();
    for (std::size_t d = 0; d < value[m].size(); ++d) {
      const std::string stream_path = index_path(micro_path, static_cast<std::int64_t>(d));
      const Json& stream = read_array(value[m][d], stream_path);
      auto& indices = micro.emplace_back();
      for (std::size_t i = 0; i < stream.size(); ++i) {
        indices.push_back(
            read_int32(stream[i], index_path(stream_path, static_cast<std::int64_t>(i))));
      }
    }
  }
  c.padding_draws = std::move(draws);
}

// A tower of the CLIP family: {"normalize", "weight"} (D x F_tower).
Matrix<double> read_tower(const Json& value, const std::string& path, bool& normalize) {
  const ObjectReader tower(value, path, {"normalize", "weight"});
  normalize = read_bool(tower.required("normalize"), tower.path("normalize"));
  const Json& weight = tower.required("weight");
  read_array(weight, tower.path("weight"));
  if (weight.size() > static_cast<std::size_t>(CaseLimits::kMaxDim)) {
    fail(tower.path("weight"), count_text(weight.size()) + " rows (D), above the limit " +
                                   std::to_string(CaseLimits::kMaxDim));
  }
  if (!weight.empty() && weight[0].is_array() &&
      (weight[0].empty() || weight[0].size() > static_cast<std::size_t>(CaseLimits::kMaxDim))) {
    fail(index_path(tower.path("weight"), 0),
         "expected 1 to " + std::to_string(CaseLimits::kMaxDim) + " numbers (F), got " +
             count_text(weight[0].size()));
  }
  return read_matrix(weight, tower.path("weight"), std::nullopt, std::nullopt);
}

// n rows of `columns` numbers each (a CLIP shard's image or text rows).
Matrix<double> read_rows(const Json& value, const std::string& path, std::size_t columns,
                         std::int64_t& numbers_in_case) {
  read_array(value, path);
  if (value.size() > static_cast<std::size_t>(CaseLimits::kMaxGroupsPerShard)) {
    fail(path, count_text(value.size()) + " rows, above the limit " +
                   std::to_string(CaseLimits::kMaxGroupsPerShard));
  }
  numbers_in_case += static_cast<std::int64_t>(value.size() * columns);
  if (numbers_in_case > CaseLimits::kMaxNumbers) {
    fail(path, "the case holds more than " + std::to_string(CaseLimits::kMaxNumbers) +
                   " feature numbers (the limit)");
  }
  return read_matrix(value, path, value.size(), columns);
}

// A family's "batches" (CLIP, SigLIP, NT-Xent): one list of DP shards per
// micro-step, each shard an object of two row lists, `keys` (image and text,
// or an NT-Xent sample's two views), of `first_columns` and `second_columns`
// numbers a row. Batch is the two-matrix shard type, in `keys` order.
template <typename Batch>
std::vector<std::vector<Batch>> read_row_pair_batches(const ObjectReader& family, const Case& c,
                                                      const std::array<std::string_view, 2>& keys,
                                                      std::size_t first_columns,
                                                      std::size_t second_columns) {
  const Json& batches = family.required("batches");
  read_array_of(batches, family.path("batches"), static_cast<std::size_t>(c.accumulation_steps),
                "micro-steps (accumulation.steps)");
  std::int64_t numbers_in_case = 0;
  std::vector<std::vector<Batch>> result;
  for (std::size_t m = 0; m < batches.size(); ++m) {
    const std::string micro_path = index_path(family.path("batches"), static_cast<std::int64_t>(m));
    read_array_of(batches[m], micro_path, static_cast<std::size_t>(c.mesh.dp),
                  "DP shards (mesh.dp)");
    auto& shards = result.emplace_back();
    for (std::size_t d = 0; d < batches[m].size(); ++d) {
      const std::string path = index_path(micro_path, static_cast<std::int64_t>(d));
      const ObjectReader shard(batches[m][d], path, {keys[0], keys[1]});
      Matrix<double> first =
          read_rows(shard.required(keys[0]), shard.path(keys[0]), first_columns, numbers_in_case);
      Matrix<double> second =
          read_rows(shard.required(keys[1]), shard.path(keys[1]), second_columns, numbers_in_case);
      shards.push_back(Batch{std::move(first), std::move(second)});
    }
  }
  return result;
}

// The "clip" object of a CLIP-family case: towers, direct parameters, batches.
void read_clip(const Json& value, Case& c) {
  const ObjectReader clip(
      value, "clip", {"image_tower", "text_tower", "log_logit_scale", "logit_bias", "batches"});
  ClipSettings settings;
  const Matrix<double> image =
      read_tower(clip.required("image_tower"), clip.path("image_tower"), settings.image_normalize);
  const Matrix<double> text =
      read_tower(clip.required("text_tower"), clip.path("text_tower"), settings.text_normalize);
  if (image.rows() != text.rows()) {
    fail(clip.path("text_tower.weight"), "has " + count_text(text.rows()) +
                                             " rows (D), the image tower has " +
                                             count_text(image.rows()));
  }
  settings.image_features = static_cast<std::int32_t>(image.cols());
  c.weight.resize(image.rows(), image.cols() + text.cols());
  c.weight << image, text;
  settings.log_logit_scale =
      read_double(clip.required("log_logit_scale"), clip.path("log_logit_scale"));
  if (const Json* bias = clip.optional("logit_bias"); bias != nullptr && !bias->is_null()) {
    settings.logit_bias = read_double(*bias, clip.path("logit_bias"));
  }
  settings.batches = read_row_pair_batches<TowerPairBatch>(clip, c, {"image", "text"},
                                                           static_cast<std::size_t>(image.cols()),
                                                           static_cast<std::size_t>(text.cols()));
  c.clip = std::move(settings);
}

// The "ntxent" object of an NT-Xent case: the shared encoder, the
// temperature, and both views of every shard's samples.
void read_ntxent(const Json& value, Case& c) {
  const ObjectReader ntxent(value, "ntxent", {"encoder", "temperature", "batches"});
  NtXentSettings settings;
  c.weight = read_tower(ntxent.required("encoder"), ntxent.path("encoder"), settings.normalize);
  settings.temperature = read_double(ntxent.required("temperature"), ntxent.path("temperature"));
  const auto columns = static_cast<std::size_t>(c.weight.cols());
  settings.batches =
      read_row_pair_batches<NtXentShardBatch>(ntxent, c, {"first", "second"}, columns, columns);
  c.ntxent = std::move(settings);
}

// The "siglip" object of a SigLIP case (the towers' weight, the root
// "encoder": {"weight"}, already read): the split, normalisations, direct
// parameters and every shard's pairs.
void read_siglip(const Json& value, Case& c) {
  const ObjectReader siglip(
      value, "siglip",
      {"image_features", "image_normalize", "text_normalize", "log_scale", "bias", "batches"});
  SigLipSettings settings;
  settings.image_features =
      read_int32(siglip.required("image_features"), siglip.path("image_features"));
  if (settings.image_features < 1 || settings.image_features >= c.weight.cols()) {
    fail(siglip.path("image_features"),
         "expected 1 to " + std::to_string(c.weight.cols() - 1) +
             " (encoder.weight's columns minus at least one text column), got " +
             std::to_string(settings.image_features));
  }
  settings.image_normalize =
      read_bool(siglip.required("image_normalize"), siglip.path("image_normalize"));
  settings.text_normalize =
      read_bool(siglip.required("text_normalize"), siglip.path("text_normalize"));
  settings.log_scale = read_double(siglip.required("log_scale"), siglip.path("log_scale"));
  settings.bias = read_double(siglip.required("bias"), siglip.path("bias"));
  const auto image_columns = static_cast<std::size_t>(settings.image_features);
  const auto text_columns = static_cast<std::size_t>(c.weight.cols()) - image_columns;
  settings.batches = read_row_pair_batches<TowerPairBatch>(siglip, c, {"image", "text"},
                                                           image_columns, text_columns);
  c.siglip = std::move(settings);
}

void read_expect(const Json& value, Case& c) {
  const ObjectReader expect(value, "expect", {"loss", "grad", "direct", "rtol", "atol"});
  Expectation result;
  result.loss = read_double(expect.required("loss"), expect.path("loss"));
  result.grad = read_matrix(expect.required("grad"), expect.path("grad"),
                            static_cast<std::size_t>(c.embedding_dim()),
                            static_cast<std::size_t>(c.feature_dim()));
  if (const Json* direct = expect.optional("direct"); direct != nullptr && !direct->is_null()) {
    // An object keyed by the case's direct parameters (direct_parameter_names).
    const std::vector<std::string> names = direct_parameter_names(c);
    const ObjectReader parameters(*direct, expect.path("direct"),
                                  std::vector<std::string_view>(names.begin(), names.end()));
    for (const std::string& name : names) {
      result.direct.push_back(read_double(parameters.required(name), parameters.path(name)));
    }
  }
  if (const Json* rtol = expect.optional("rtol"); rtol != nullptr && !rtol->is_null()) {
    result.rtol = read_double(*rtol, expect.path("rtol"));
  }
  if (const Json* atol = expect.optional("atol"); atol != nullptr && !atol->is_null()) {
    result.atol = read_double(*atol, expect.path("atol"));
  }
  c.expect = std::move(result);
}

// The extension key "found": a campaign's record of how it found the case.
// Names are checked for shape only (the registry of mutants and properties
// lives above this layer): a short printable string.
std::string read_name(const Json& value, std::string_view path) {
  constexpr std::size_t kMaxName = 64;
  if (!value.is_string()) fail_type(path, "a name (a string)", value);
  const std::string& name = value.get_ref<const std::string&>();
  const bool printable =
      std::all_of(name.begin(), name.end(), [](char ch) { return ch > ' ' && ch < 0x7f; });
  if (name.empty() || name.size() > kMaxName || !printable) {
    fail(shown_path(path), "expected a name of 1 to " + std::to_string(kMaxName) +
                               " printable characters without spaces, got " + describe(value));
  }
  return name;
}

void read_found(const Json& value, Case& c) {
  const ObjectReader found(value, "found", {"mutant", "property", "seed", "case_index", "limits"});
  Finding result;
  if (const Json& mutant = found.required("mutant"); !mutant.is_null()) {
    result.mutant = read_name(mutant, found.path("mutant"));
  }
  result.property = read_name(found.required("property"), found.path("property"));
  result.seed = read_uint64(found.required("seed"), found.path("seed"));
  result.case_index = read_int64(found.required("case_index"), found.path("case_index"));
  if (result.case_index < 0) {
    fail(found.path("case_index"), "must be >= 0, got " + std::to_string(result.case_index));
  }
  if (const Json* limits = found.optional("limits"); limits != nullptr && !limits->is_null()) {
    result.limits = read_choice(*limits, found.path("limits"), kLimitsNames);
  }
  c.found = std::move(result);
}

// The extension key "strategy": gather, scope and scale; reduction optional
// (the case's `reduction`, which it must equal when given); group optional
// ("dp" when absent).
void read_strategy(const Json& value, Case& c) {
  const ObjectReader strategy(value, "strategy",
                              {"gather", "scope", "scale", "reduction", "group"});
  Strategy result;
  result.gather =
      read_choice(strategy.required("gather"), strategy.path("gather"), kGatherKindNames);
  result.scope = read_choice(strategy.required("scope"), strategy.path("scope"), kLossScopeNames);
  result.scale =
      read_choice(strategy.required("scale"), strategy.path("scale"), kBackwardScaleNames);
  result.reduction = c.reduction;
  if (const Json* reduction = strategy.optional("reduction");
      reduction != nullptr && !reduction->is_null()) {
    result.reduction = read_choice(*reduction, strategy.path("reduction"), kReductionNames);
  }
  if (const Json* group = strategy.optional("group"); group != nullptr && !group->is_null()) {
    result.group = read_choice(*group, strategy.path("group"), kGatherGroupNames);
  }
  c.strategy = result;
}

// An optional key: absent and null both mean "not given".
const Json* given(const ObjectReader& object, std::string_view key) {
  const Json* value = object.optional(key);
  return value != nullptr && !value->is_null() ? value : nullptr;
}

// ---------------------------------------------------------------------------
// Writing.

OrderedJson matrix_json(const Matrix<double>& matrix) {
  OrderedJson rows = OrderedJson::array();
  for (Eigen::Index r = 0; r < matrix.rows(); ++r) {
    OrderedJson row = OrderedJson::array();
    for (Eigen::Index j = 0; j < matrix.cols(); ++j) row.push_back(matrix(r, j));
    rows.push_back(std::move(row));
  }
  return rows;
}

OrderedJson shard_json(const loss::ShardBatch& shard) {
  OrderedJson groups = OrderedJson::array();
  Eigen::Index row = 0;
  for (const std::int32_t negatives : shard.negative_counts) {
    INFONCE_ASSERT(negatives >= 0);
    OrderedJson group = OrderedJson::array();
    for (std::int32_t i = 0; i < negatives + 2; ++i, ++row) {
      INFONCE_ASSERT(row < shard.features.rows());
      OrderedJson numbers = OrderedJson::array();
      for (Eigen::Index j = 0; j < shard.features.cols(); ++j) {
        numbers.push_back(shard.features(row, j));
      }
      group.push_back(std::move(numbers));
    }
    groups.push_back(std::move(group));
  }
  INFONCE_ASSERT(row == shard.features.rows());
  return groups;
}

template <class Enum, std::size_t N>
std::string_view choice_name(Enum value, const std::array<EnumName<Enum>, N>& choices) {
  const std::string_view name = name_in(choices, value);
  INFONCE_ASSERT(!name.empty());
  return name;
}

// The "clip" object: towers (Case::weight split at F_image), direct
// parameters, batches.
OrderedJson clip_json(const Case& c) {
  const ClipSettings& clip = *c.clip;
  const Eigen::Index image = clip.image_features;
  OrderedJson out;
  out["image_tower"] = {{"normalize", clip.image_normalize},
                        {"weight", matrix_json(c.weight.leftCols(image))}};
  out["text_tower"] = {{"normalize", clip.text_normalize},
                       {"weight", matrix_json(c.weight.rightCols(c.weight.cols() - image))}};
  out["log_logit_scale"] = clip.log_logit_scale;
  out["logit_bias"] = clip.logit_bias ? OrderedJson(*clip.logit_bias) : OrderedJson(nullptr);
  OrderedJson batches = OrderedJson::array();
  for (const auto& micro : clip.batches) {
    OrderedJson shards = OrderedJson::array();
    for (const TowerPairBatch& shard : micro) {
      shards.push_back({{"image", matrix_json(shard.image)}, {"text", matrix_json(shard.text)}});
    }
    batches.push_back(std::move(shards));
  }
  out["batches"] = std::move(batches);
  return out;
}

// The "ntxent" object: the encoder, the temperature, both views per shard.
OrderedJson ntxent_json(const Case& c) {
  const NtXentSettings& ntxent = *c.ntxent;
  OrderedJson out;
  out["encoder"] = {{"normalize", ntxent.normalize}, {"weight", matrix_json(c.weight)}};
  out["temperature"] = ntxent.temperature;
  OrderedJson batches = OrderedJson::array();
  for (const auto& micro : ntxent.batches) {
    OrderedJson shards = OrderedJson::array();
    for (const NtXentShardBatch& shard : micro) {
      shards.push_back(
          {{"first", matrix_json(shard.first)}, {"second", matrix_json(shard.second)}});
    }
    batches.push_back(std::move(shards));
  }
  out["batches"] = std::move(batches);
  return out;
}

// The "siglip" object: the split, normalisations, direct parameters, pairs.
OrderedJson siglip_json(const Case& c) {
  const SigLipSettings& siglip = *c.siglip;
  OrderedJson out;
  out["image_features"] = siglip.image_features;
  out["image_normalize"] = siglip.image_normalize;
  out["text_normalize"] = siglip.text_normalize;
  out["log_scale"] = siglip.log_scale;
  out["bias"] = siglip.bias;
  OrderedJson batches = OrderedJson::array();
  for (const auto& micro : siglip.batches) {
    OrderedJson shards = OrderedJson::array();
    for (const TowerPairBatch& shard : micro) {
      shards.push_back({{"image", matrix_json(shard.image)}, {"text", matrix_json(shard.text)}});
    }
    batches.push_back(std::move(shards));
  }
  out["batches"] = std::move(batches);
  return out;
}

OrderedJson case_json(const Case& c) {
  OrderedJson out;
  out["format"] = kFormat;
  if (c.clip) out["family"] = "clip";
  if (c.ntxent) out["family"] = "ntxent";
  if (c.siglip) out["family"] = "siglip";
  // Only InfoNCE has loss settings, its own encoder key, generators and batches.
  const bool infonce = !c.clip && !c.ntxent && !c.siglip;
  out["mesh"] = {{"world", c.mesh.world}, {"dp", c.mesh.dp}};
  out["reduction"] = choice_name(c.reduction, kReductionNames);
  out["gather"] = choice_name(c.gather, kGatherPathNames);
  out["compensate"] = c.compensate;
  if (infonce) {
    OrderedJson loss;
    loss["temperature"] = c.loss.temperature;
    loss["use_batch"] = c.loss.use_batch;
    loss["hard_negatives"] =
        c.loss.hard_negatives ? OrderedJson(*c.loss.hard_negatives) : OrderedJson(nullptr);
    loss["padding"] = choice_name(c.loss.padding, kPaddingNames);
    loss["mask_fake_negative"] = c.loss.mask_fake_negative;
    loss["fake_neg_margin"] = c.loss.fake_neg_margin;
    loss["include_qq"] = c.loss.include_qq;
    loss["include_dd"] = c.loss.include_dd;
    out["loss"] = std::move(loss);
    out["encoder"] = {{"normalize", c.encoder_normalize}, {"weight", matrix_json(c.weight)}};
  } else if (c.clip) {
    out["clip"] = clip_json(c);
  } else if (c.siglip) {
    out["encoder"] = {{"weight", matrix_json(c.weight)}};
    out["siglip"] = siglip_json(c);
  } else {
    out["ntxent"] = ntxent_json(c);
  }
  out["accumulation"] = {{"steps", c.accumulation_steps}, {"normalize", c.accumulation_normalize}};
  if (c.accumulation_window) out["accumulation"]["window"] = *c.accumulation_window;
  if (infonce) {
    out["rng"] = {{"mode", choice_name(c.rng_mode, kRngModeNames)}, {"seed", c.rng_seed}};
  }
  // The extension key is written only when it departs from the SPEC's default.
  if (c.scalar == ScalarType::float32) out["dtype"] = "float32";
  if (c.strategy) {
    out["strategy"] = {{"gather", choice_name(c.strategy->gather, kGatherKindNames)},
                       {"scope", choice_name(c.strategy->scope, kLossScopeNames)},
                       {"scale", choice_name(c.strategy->scale, kBackwardScaleNames)},
                       {"reduction", choice_name(c.strategy->reduction, kReductionNames)}};
    // Written only for a world gather: a dp point's file stays as it was.
    if (c.strategy->group == GatherGroup::world) {
      out["strategy"]["group"] = choice_name(c.strategy->group, kGatherGroupNames);
    }
  }
  if (c.learnable_temperature) out["learnable_temperature"] = true;
  if (c.padding_draws) out["padding_draws"] = *c.padding_draws;
  if (infonce) {
    OrderedJson batches = OrderedJson::array();
    for (const auto& micro : c.batches) {
      OrderedJson shards = OrderedJson::array();
      for (const loss::ShardBatch& shard : micro) shards.push_back(shard_json(shard));
      batches.push_back(std::move(shards));
    }
    out["batches"] = std::move(batches);
  }
  if (c.expect) {
    out["expect"] = {{"loss", c.expect->loss}, {"grad", matrix_json(c.expect->grad)}};
    if (!c.expect->direct.empty()) {
      const std::vector<std::string> names = direct_parameter_names(c);
      INFONCE_ASSERT(names.size() == c.expect->direct.size());
      OrderedJson direct;
      for (std::size_t i = 0; i < names.size(); ++i) direct[names[i]] = c.expect->direct[i];
      out["expect"]["direct"] = std::move(direct);
    }
    out["expect"]["rtol"] = c.expect->rtol;
    out["expect"]["atol"] = c.expect->atol;
  }
  if (c.found) {
    out["found"] = {{"mutant", c.found->mutant ? OrderedJson(*c.found->mutant) : OrderedJson()},
                    {"property", c.found->property},
                    {"seed", c.found->seed},
                    {"case_index", c.found->case_index},
                    {"limits", c.found->limits}};
  }
  return out;
}

// Arrays nested in `value`, objects seen through (a CLIP shard's rows).
std::size_t array_depth(const OrderedJson& value) {
  if (!value.is_array() && !value.is_object()) return 0;
  std::size_t deepest = 0;
  for (const auto& element : value) deepest = std::max(deepest, array_depth(element));
  return (value.is_array() ? 1 : 0) + deepest;
}

// Arrays nested three or more deep (batches, padding_draws, clip.batches) are
// broken into lines down to one group (a CLIP shard) per line; everything
// else is compact. nlohmann
// prints doubles in the shortest form that reads back to the same bits.
void append_laid_out(std::string& out, const OrderedJson& value, std::size_t indent) {
  if (array_depth(value) < 3 || value.empty()) {
    out += value.dump();
    return;
  }
  if (value.is_object()) {  // the "clip" object: one key per line
    out += "{\n";
    std::size_t index = 0;
    for (const auto& [key, member] : value.items()) {
      out.append(indent + 2, ' ');
      out += OrderedJson(key).dump() + ": ";
      append_laid_out(out, member, indent + 2);
      out += ++index < value.size() ? ",\n" : "\n";
    }
    out.append(indent, ' ');
    out += '}';
    return;
  }
  out += "[\n";
  for (std::size_t i = 0; i < value.size(); ++i) {
    out.append(indent + 2, ' ');
    append_laid_out(out, value[i], indent + 2);
    out += i + 1 < value.size() ? ",\n" : "\n";
  }
  out.append(indent, ' ');
  out += ']';
}

// The run settings a family's case file (CLIP, SigLIP, NT-Xent) holds as an
// InfoNCE case does: mesh, reduction, gather, compensate, accumulation,
// dtype and strategy.
Case read_family_run_settings(const ObjectReader& root) {
  Case c;
  c.mesh = read_mesh(root.required("mesh"));
  c.reduction = read_choice(root.required("reduction"), "reduction", kReductionNames);
  c.gather = read_choice(root.required("gather"), "gather", kGatherPathNames);
  c.compensate = read_bool(root.required("compensate"), "compensate");
  read_accumulation(root.required("accumulation"), c);
  if (const Json* dtype = given(root, "dtype")) {
    c.scalar = read_choice(*dtype, "dtype", kScalarTypeNames);
  }
  if (const Json* strategy = given(root, "strategy")) read_strategy(*strategy, c);
  return c;
}

// A family's case after its own keys: the optional expect and found, then
// the case's invariants.
Case finish_family_case(const ObjectReader& root, Case c) {
  if (const Json* expect = given(root, "expect")) read_expect(*expect, c);
  if (const Json* found = given(root, "found")) read_found(*found, c);
  validate_case(c);
  return c;
}

// The keys of a CLIP-family case ("family": "clip"): no InfoNCE settings,
// encoder, generators or batches.
Case parse_clip_case(const ObjectReader& root) {
  for (const std::string_view key :
       {"loss", "encoder", "rng", "batches", "padding_draws", "learnable_temperature", "siglip"}) {
    if (root.optional(key) != nullptr) {
      fail(key, "is an InfoNCE key; a case with \"family\": \"clip\" has none");
    }
  }
  Case c = read_family_run_settings(root);
  read_clip(root.required("clip"), c);
  return finish_family_case(root, std::move(c));
}

// The keys of an NT-Xent case ("family": "ntxent"): no InfoNCE settings,
// encoder, generators or batches; a learnable temperature is allowed.
Case parse_ntxent_case(const ObjectReader& root) {
  for (const std::string_view key :
       {"loss", "encoder", "rng", "batches", "padding_draws", "clip", "siglip"}) {
    if (root.optional(key) != nullptr) {
      fail(key, "is not a key of a case with \"family\": \"ntxent\"");
    }
  }
  Case c = read_family_run_settings(root);
  if (const Json* learnable = given(root, "learnable_temperature")) {
    c.learnable_temperature = read_bool(*learnable, "learnable_temperature");
  }
  read_ntxent(root.required("ntxent"), c);
  return finish_family_case(root, std::move(c));
}

// The keys of a SigLIP case ("family": "siglip"): the towers' weight under
// "encoder" (its only key), no InfoNCE settings, generators or batches.
Case parse_siglip_case(const ObjectReader& root) {
  for (const std::string_view key :
       {"loss", "rng", "batches", "padding_draws", "clip", "ntxent", "learnable_temperature"}) {
    if (root.optional(key) != nullptr) {
      fail(key, "is not a key of a case with \"family\": \"siglip\"");
    }
  }
  Case c = read_family_run_settings(root);
  const ObjectReader encoder(root.required("encoder"), "encoder", {"weight"});
  c.weight = read_encoder_weight(encoder.required("weight"));
  read_siglip(root.required("siglip"), c);
  return finish_family_case(root, std::move(c));
}

}  // namespace

Case parse_case(std::string_view json_text) {
  const Json document = parse_json(json_text);
  const ObjectReader root(document, "",
                          {"format",        "family",     "mesh",     "reduction",
                           "gather",        "compensate", "loss",     "encoder",
                           "clip",          "ntxent",     "siglip",   "accumulation",
                           "rng",           "dtype",      "strategy", "learnable_temperature",
                           "padding_draws", "batches",    "expect",   "found"});
  read_format(root);
  if (const Json* family = given(root, "family")) {
    const LossFamily chosen = read_choice(*family, "family", kLossFamilyNames);
    if (chosen == LossFamily::clip) return parse_clip_case(root);
    if (chosen == LossFamily::ntxent) return parse_ntxent_case(root);
    if (chosen == LossFamily::siglip) return parse_siglip_case(root);
  }
  if (root.optional("clip") != nullptr) fail("clip", "needs \"family\": \"clip\"");
  if (root.optional("ntxent") != nullptr) fail("ntxent", "needs \"family\": \"ntxent\"");
  if (root.optional("siglip") != nullptr) fail("siglip", "needs \"family\": \"siglip\"");
  Case c;
  c.mesh = read_mesh(root.required("mesh"));
  c.reduction = read_choice(root.required("reduction"), "reduction", kReductionNames);
  c.gather = read_choice(root.required("gather"), "gather", kGatherPathNames);
  c.compensate = read_bool(root.required("compensate"), "compensate");
  c.loss = read_loss_settings(root.required("loss"));
  read_encoder(root.required("encoder"), c);
  read_accumulation(root.required("accumulation"), c);
  read_rng(root.required("rng"), c);
  if (const Json* dtype = given(root, "dtype")) {
    c.scalar = read_choice(*dtype, "dtype", kScalarTypeNames);
  }
  if (const Json* strategy = given(root, "strategy")) read_strategy(*strategy, c);
  if (const Json* learnable = given(root, "learnable_temperature")) {
    c.learnable_temperature = read_bool(*learnable, "learnable_temperature");
  }
  if (const Json* draws = given(root, "padding_draws")) read_padding_draws(*draws, c);
  read_batches(root.required("batches"), c);
  if (const Json* expect = given(root, "expect")) read_expect(*expect, c);
  if (const Json* found = given(root, "found")) read_found(*found, c);
  validate_case(c);
  return c;
}

Case read_case_file(const std::filesystem::path& path) {
  const std::string name = path.string();
  std::error_code error;
  const auto status = std::filesystem::status(path, error);
  if (error) throw InputError(name + ": cannot read: " + error.message());
  if (std::filesystem::is_directory(status)) {
    throw InputError(name + ": is a directory, expected a case file");
  }
  if (!std::filesystem::is_regular_file(status)) {
    throw InputError(name + ": not a regular file");
  }
  const std::uintmax_t size = std::filesystem::file_size(path, error);
  if (error) throw InputError(name + ": cannot read: " + error.message());
  if (size > kMaxCaseFileBytes) {
    throw InputError(name + ": " + std::to_string(size) + " bytes, above the limit " +
                     std::to_string(kMaxCaseFileBytes));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(name + ": cannot open for reading");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw InputError(name + ": read error");
  try {
    return parse_case(text.view());
  } catch (const InputError& bad_case) {
    throw InputError(name + ": " + bad_case.what());
  }
}

std::string case_to_json(const Case& c) {
  const OrderedJson document = case_json(c);
  std::string out = "{\n";
  std::size_t index = 0;
  for (const auto& [key, value] : document.items()) {
    out += "  " + OrderedJson(key).dump() + ": ";
    append_laid_out(out, value, 2);
    out += ++index < document.size() ? ",\n" : "\n";
  }
  out += "}\n";
  return out;
}

void write_case_file(const Case& c, const std::filesystem::path& path) {
  const std::string text = case_to_json(c);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw InputError(path.string() + ": cannot open for writing");
  out << text;
  out.flush();
  if (!out) throw InputError(path.string() + ": write error");
}

}  // namespace infonce
