#include "sut/protocol.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "casefile/case_json.hpp"

namespace infonce::sut {
namespace {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

[[noreturn]] void fail(const std::string& path, const std::string& problem) {
  throw ProtocolError(path + ": " + problem);
}

std::string at_index(const std::string& path, std::size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

std::string kind_of(const Json& value) {
  if (value.is_array()) return "an array of " + std::to_string(value.size());
  if (value.is_object()) return "an object";
  if (value.is_string()) return "a string";
  if (value.is_boolean()) return "a boolean";
  if (value.is_null()) return "null";
  return "a number";
}

Json parse_line(std::string_view line, const std::string& what) {
  Json value = Json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) throw OutOfStep(what + ": not a JSON line: " + shown_line(line));
  if (!value.is_object()) {
    throw OutOfStep(what + ": expected a JSON object, got " + kind_of(value) + ": " +
                    shown_line(line));
  }
  return value;
}

const Json& required(const Json& object, const std::string& path, const char* key) {
  const auto it = object.find(key);
  if (it == object.end()) fail(path + "." + key, "missing key");
  return *it;
}

bool read_bool(const Json& value, const std::string& path) {
  if (!value.is_boolean()) fail(path, "expected true or false, got " + kind_of(value));
  return value.get<bool>();
}

std::int64_t read_int(const Json& value, const std::string& path, std::int64_t lo,
                      std::int64_t hi) {
  if (!value.is_number_integer()) fail(path, "expected an integer, got " + kind_of(value));
  if (value.is_number_unsigned() && value.get<std::uint64_t>() > static_cast<std::uint64_t>(hi)) {
    fail(path, "expected at most " + std::to_string(hi));
  }
  const std::int64_t n = value.get<std::int64_t>();
  if (n < lo || n > hi) {
    fail(path, "expected an integer from " + std::to_string(lo) + " to " + std::to_string(hi) +
                   ", got " + std::to_string(n));
  }
  return n;
}

std::string read_string(const Json& value, const std::string& path) {
  if (!value.is_string()) fail(path, "expected a string, got " + kind_of(value));
  return value.get<std::string>();
}

// A non-empty list of named choices, e.g. ["mean", "sum"].
template <class T>
std::vector<T> read_choices(const Json& value, const std::string& path,
                            const std::vector<std::pair<const char*, T>>& names) {
  std::string expected;
  for (const auto& [name, _] : names)
    expected += (expected.empty() ? "\"" : ", \"") + std::string(name) + "\"";
  if (!value.is_array() || value.empty()) {
    fail(path, "expected a non-empty array of " + expected + ", got " + kind_of(value));
  }
  std::vector<T> out;
  for (std::size_t i = 0; i < value.size(); ++i) {
    const std::string text = value[i].is_string() ? value[i].get<std::string>() : "";
    const auto it = std::find_if(names.begin(), names.end(),
                                 [&](const auto& entry) { return text == entry.first; });
    if (it == names.end()) fail(at_index(path, i), "expected one of " + expected);
    if (std::find(out.begin(), out.end(), it->second) == out.end()) out.push_back(it->second);
  }
  return out;
}

std::vector<bool> read_flags(const Json& value, const std::string& path) {
  if (!value.is_array() || value.empty()) {
    fail(path, "expected a non-empty array of true/false, got " + kind_of(value));
  }
  std::vector<bool> out;
  for (std::size_t i = 0; i < value.size(); ++i) {
    const bool flag = read_bool(value[i], at_index(path, i));
    if (std::find(out.begin(), out.end(), flag) == out.end()) out.push_back(flag);
  }
  return out;
}

Supports read_supports(const Json& value, const std::string& path) {
  if (!value.is_object()) fail(path, "expected an object, got " + kind_of(value));
  Supports s;
  auto given = [&](const char* key) -> const Json* {
    const auto it = value.find(key);
    return it == value.end() ? nullptr : &*it;
  };
  auto p = [&](const char* key) { return path + "." + key; };
  if (auto v = given("use_batch")) s.use_batch = read_flags(*v, p("use_batch"));
  if (auto v = given("hard_negatives")) s.hard_negatives = read_bool(*v, p("hard_negatives"));
  if (auto v = given("padding")) {
    s.padding = read_choices<loss::Padding>(
        *v, p("padding"), {{"legacy", loss::Padding::legacy}, {"fixed", loss::Padding::fixed}});
  }
  if (auto v = given("mask_fake_negative"))
    s.mask_fake_negative = read_bool(*v, p("mask_fake_negative"));
  if (auto v = given("include_qq")) s.include_qq = read_bool(*v, p("include_qq"));
  if (auto v = given("include_dd")) s.include_dd = read_bool(*v, p("include_dd"));
  if (auto v = given("reductions")) {
    s.reductions = read_choices<Reduction>(*v, p("reductions"),
                                           {{"mean", Reduction::mean}, {"sum", Reduction::sum}});
  }
  if (auto v = given("gathers")) {
    s.gathers = read_choices<GatherPath>(
        *v, p("gathers"), {{"object", GatherPath::object}, {"tensor", GatherPath::tensor}});
  }
  if (auto v = given("dtypes")) {
    s.dtypes = read_choices<ScalarType>(
        *v, p("dtypes"), {{"float64", ScalarType::float64}, {"float32", ScalarType::float32}});
  }
  if (auto v = given("max_world")) {
    s.max_world = static_cast<std::int32_t>(read_int(*v, p("max_world"), 1, CaseLimits::kMaxWorld));
  }
  if (auto v = given("max_replicas")) {
    s.max_replicas =
        static_cast<std::int32_t>(read_int(*v, p("max_replicas"), 1, CaseLimits::kMaxWorld));
  }
  if (auto v = given("min_dim")) {
    s.min_dim = static_cast<std::int32_t>(read_int(*v, p("min_dim"), 1, CaseLimits::kMaxDim));
  }
  if (auto v = given("compensate_false")) s.compensate_false = read_bool(*v, p("compensate_false"));
  if (auto v = given("accumulation_normalize"))
    s.accumulation_normalize = read_flags(*v, p("accumulation_normalize"));
  if (auto v = given("rng_modes")) {
    s.rng_modes = read_choices<RngMode>(
        *v, p("rng_modes"), {{"synced", RngMode::synced}, {"per-rank", RngMode::per_rank}});
  }
  if (auto v = given("replays_padding_draws"))
    s.replays_padding_draws = read_bool(*v, p("replays_padding_draws"));
  if (auto v = given("extension_keys")) {
    if (!v->is_array())
      fail(p("extension_keys"), "expected an array of strings, got " + kind_of(*v));
    for (std::size_t i = 0; i < v->size(); ++i) {
      s.extension_keys.push_back(read_string((*v)[i], at_index(p("extension_keys"), i)));
    }
  }
  if (auto v = given("families")) {
    enum class Family { infonce, clip, ntxent, siglip };
    const std::vector<Family> families = read_choices<Family>(*v, p("families"),
                                                              {{"infonce", Family::infonce},
                                                               {"clip", Family::clip},
                                                               {"ntxent", Family::ntxent},
                                                               {"siglip", Family::siglip}});
    const auto runs = [&families](Family f) {
      return std::find(families.begin(), families.end(), f) != families.end();
    };
    s.infonce_family = runs(Family::infonce);
    s.clip_family = runs(Family::clip);
    s.ntxent_family = runs(Family::ntxent);
    s.siglip_family = runs(Family::siglip);
  }
  if (auto v = given("logit_bias")) s.logit_bias = read_bool(*v, p("logit_bias"));
  if (auto v = given("unequal_batches")) s.unequal_batches = read_bool(*v, p("unequal_batches"));
  if (auto v = given("unequal_documents"))
    s.unequal_documents = read_bool(*v, p("unequal_documents"));
  if (auto v = given("unequal_shapes")) s.unequal_shapes = read_bool(*v, p("unequal_shapes"));
  if (auto v = given("reported_loss")) {
    enum class Scope { global, rank_local };
    const std::vector<Scope> scope =
        read_choices<Scope>(Json::array({*v}), p("reported_loss"),
                            {{"global", Scope::global}, {"rank-local", Scope::rank_local}});
    s.rank_local_loss = scope.front() == Scope::rank_local;
  }
  // Unknown keys are ignored: a newer SUT may declare more than we know.
  return s;
}

double read_number_or_null(const Json& value, const std::string& path) {
  if (value.is_null()) return std::numeric_limits<double>::quiet_NaN();
  if (!value.is_number()) fail(path, "expected a number (or null), got " + kind_of(value));
  return value.get<double>();
}

void require_length(const Json& value, const std::string& path, std::size_t n,
                    const std::string& what) {
  if (!value.is_array() || value.size() != n) {
    fail(path, "expected " + std::to_string(n) + " " + what + ", got " + kind_of(value));
  }
}

Matrix<double> read_matrix(const Json& value, const std::string& path, std::int64_t rows,
                           std::int64_t cols) {
  const std::string shape = std::to_string(rows) + " x " + std::to_string(cols);
  require_length(value, path, static_cast<std::size_t>(rows),
                 "rows (" + shape + " numbers, D x F)");
  Matrix<double> m(rows, cols);
  for (std::int64_t r = 0; r < rows; ++r) {
    const Json& row = value[static_cast<std::size_t>(r)];
    const std::string row_path = at_index(path, static_cast<std::size_t>(r));
    require_length(row, row_path, static_cast<std::size_t>(cols), "numbers (F)");
    for (std::int64_t f = 0; f < cols; ++f) {
      m(r, f) = read_number_or_null(row[static_cast<std::size_t>(f)],
                                    at_index(row_path, static_cast<std::size_t>(f)));
    }
  }
  return m;
}

loss::RecordedDraws read_draws(const Json& value, const std::string& path, const Case& c) {
  require_length(value, path, static_cast<std::size_t>(c.accumulation_steps),
                 "micro-steps (accumulation.steps)");
  loss::RecordedDraws draws;
  for (std::size_t m = 0; m < value.size(); ++m) {
    const std::string micro_path = at_index(path, m);
    require_length(value[m], micro_path, static_cast<std::size_t>(c.mesh.world),
                   "lists (one per world rank)");
    auto& ranks = draws.emplace_back();
    for (std::size_t w = 0; w < value[m].size(); ++w) {
      const Json& list = value[m][w];
      const std::string rank_path = at_index(micro_path, w);
      if (!list.is_array()) fail(rank_path, "expected an array of draws, got " + kind_of(list));
      auto& out = ranks.emplace_back();
      for (std::size_t i = 0; i < list.size(); ++i) {
        out.push_back(static_cast<std::int32_t>(
            read_int(list[i], at_index(rank_path, i), 0, CaseLimits::kMaxNegatives)));
      }
    }
  }
  return draws;
}

StepResult read_result(const Json& response, const Case& c) {
  const std::string path = "response";
  StepResult result;
  const Json& losses = required(response, path, "losses");
  require_length(losses, path + ".losses", static_cast<std::size_t>(c.mesh.world),
                 "numbers (one per world rank)");
  for (std::size_t w = 0; w < losses.size(); ++w) {
    result.losses.push_back(read_number_or_null(losses[w], at_index(path + ".losses", w)));
  }
  result.grad = read_matrix(required(response, path, "grad"), path + ".grad", c.embedding_dim(),
                            c.feature_dim());
  const std::vector<std::string> names = direct_parameter_names(c);
  if (!names.empty()) {
    const Json& direct = required(response, path, "direct");
    if (!direct.is_object()) {
      fail(path + ".direct",
           "expected an object keyed by the direct parameters, got " + kind_of(direct));
    }
    for (const std::string& name : names) {
      result.direct.push_back(read_number_or_null(required(direct, path + ".direct", name.c_str()),
                                                  path + ".direct." + name));
    }
  }
  if (const auto it = response.find("grads"); it != response.end()) {
    require_length(*it, path + ".grads", static_cast<std::size_t>(c.mesh.world),
                   "gradients (W x D x F, one per world rank)");
    auto& grads = result.grads.emplace();
    for (std::size_t w = 0; w < it->size(); ++w) {
      grads.push_back(
          read_matrix((*it)[w], at_index(path + ".grads", w), c.embedding_dim(), c.feature_dim()));
    }
  }
  if (const auto it = response.find("padding_draws"); it != response.end()) {
    result.padding_draws = read_draws(*it, path + ".padding_draws", c);
  } else if (c.loss.hard_negatives) {
    fail(path + ".padding_draws",
         "missing key (the case sets loss.hard_negatives: [micro][world rank] -> draws)");
  }
  return result;
}

}  // namespace

bool has_unequal_batches(const Case& c) {
  if (c.ntxent) {
    for (const auto& shards : c.ntxent->batches) {
      for (const NtXentShardBatch& shard : shards) {
        if (shard.first.rows() != shards.front().first.rows()) return true;
      }
    }
    return false;
  }
  if (c.clip || c.siglip) {  // pairs
    for (const auto& shards : c.clip ? c.clip->batches : c.siglip->batches) {
      for (const TowerPairBatch& shard : shards) {
        if (shard.image.rows() != shards.front().image.rows()) return true;
      }
    }
    return false;
  }
  for (const auto& shards : c.batches) {
    for (const loss::ShardBatch& shard : shards) {
      if (shard.negative_counts.size() != shards.front().negative_counts.size()) return true;
    }
  }
  return false;
}

bool has_unequal_documents(const Case& c) {
  if (c.clip || c.ntxent || c.siglip) return false;
  std::optional<std::int32_t> first;
  for (const auto& shards : c.batches) {
    for (const loss::ShardBatch& shard : shards) {
      for (const std::int32_t k : shard.negative_counts) {
        if (first && k != *first) return true;
        first = k;
      }
    }
  }
  return false;
}

bool has_unequal_shapes(const Case& c) {
  if (c.clip || c.ntxent || c.siglip) return has_unequal_batches(c);
  for (const auto& shards : c.batches) {
    for (const loss::ShardBatch& shard : shards) {
      if (shard.features.rows() != shards.front().features.rows()) return true;
    }
  }
  return false;
}

bool Supports::declares(std::string_view key) const {
  return std::find(extension_keys.begin(), extension_keys.end(), key) != extension_keys.end();
}

std::string shown_line(std::string_view line) {
  constexpr std::size_t kShown = 200;
  std::string text(line.substr(0, kShown));
  for (char& ch : text) {
    if (static_cast<unsigned char>(ch) < 0x20) ch = ' ';
  }
  if (line.size() > kShown) text += "...";
  return "'" + text + "'";
}

std::optional<std::string> outside_supports(const Case& c, const Supports& s) {
  auto lacks = [](const auto& values, const auto& value) {
    return std::find(values.begin(), values.end(), value) == values.end();
  };
  if (c.mesh.world > s.max_world) return "world " + std::to_string(c.mesh.world) + " > max_world";
  if (c.mesh.replicas() > s.max_replicas) {
    return "replicas " + std::to_string(c.mesh.replicas()) + " > max_replicas";
  }
  if (std::min(c.feature_dim(), c.embedding_dim()) < s.min_dim)
    return std::string("F or D < min_dim");
  if (lacks(s.use_batch, c.loss.use_batch))
    return std::string("use_batch ") + (c.loss.use_batch ? "true" : "false");
  if (c.loss.hard_negatives && !s.hard_negatives) return std::string("hard_negatives");
  if (c.loss.hard_negatives && lacks(s.padding, c.loss.padding)) {
    return std::string("padding ") + (c.loss.padding == loss::Padding::legacy ? "legacy" : "fixed");
  }
  if (c.loss.mask_fake_negative && !s.mask_fake_negative) return std::string("mask_fake_negative");
  if (c.loss.include_qq && !s.include_qq) return std::string("include_qq");
  if (c.loss.include_dd && !s.include_dd) return std::string("include_dd");
  if (lacks(s.reductions, c.reduction)) return std::string("reduction");
  if (lacks(s.gathers, c.gather)) return std::string("gather");
  if (lacks(s.dtypes, c.scalar) || (c.scalar == ScalarType::float32 && !s.declares("dtype"))) {
    return std::string("dtype");
  }
  if (!c.compensate && !s.compensate_false) return std::string("compensate false");
  if (c.clip && !(s.clip_family && s.declares("family"))) return std::string("family clip");
  if (c.ntxent && !(s.ntxent_family && s.declares("family"))) return std::string("family ntxent");
  if (c.siglip && !(s.siglip_family && s.declares("family"))) return std::string("family siglip");
  if (!c.clip && !c.ntxent && !c.siglip && !s.infonce_family) {
    return std::string("family infonce");
  }
  if (c.clip && c.clip->logit_bias && !s.logit_bias) return std::string("logit_bias");
  if (!s.unequal_batches && has_unequal_batches(c)) return std::string("unequal batches");
  if (!s.unequal_documents && has_unequal_documents(c)) return std::string("unequal documents");
  if (!s.unequal_shapes && has_unequal_shapes(c)) return std::string("unequal shapes");
  if (c.learnable_temperature && !s.declares("learnable_temperature")) {
    return std::string("learnable_temperature");
  }
  if (c.strategy && !s.declares("strategy")) return std::string("strategy");
  if (lacks(s.accumulation_normalize, c.accumulation_normalize)) {
    return std::string("accumulation.normalize");
  }
  if (lacks(s.rng_modes, c.rng_mode)) return std::string("rng.mode");
  if (c.padding_draws && c.loss.hard_negatives && !s.replays_padding_draws) {
    return std::string("padding_draws (the SUT does not replay recorded draws)");
  }
  return std::nullopt;
}

Handshake parse_handshake(std::string_view line) {
  const std::string path = "handshake";
  const Json value = parse_line(line, path);
  const Json& protocol = required(value, path, "protocol");
  if (!protocol.is_string() || protocol.get<std::string>() != kProtocol) {
    fail(path + ".protocol",
         "the SUT speaks " +
             (protocol.is_string() ? "'" + protocol.get<std::string>() + "'" : kind_of(protocol)) +
             ", this harness speaks '" + std::string(kProtocol) + "'");
  }
  Handshake handshake;
  handshake.name = read_string(required(value, path, "name"), path + ".name");
  handshake.supports = read_supports(required(value, path, "supports"), path + ".supports");
  return handshake;
}

std::string encode_request(std::int64_t id, const Case& c, const Supports& supports) {
  return encode_request(id, case_to_json(c), supports);
}

std::string encode_request(std::int64_t id, const std::string& case_json,
                           const Supports& supports) {
  OrderedJson body = OrderedJson::parse(case_json);
  body.erase("expect");
  body.erase("found");
  if (!supports.declares("dtype")) body.erase("dtype");
  if (!supports.declares("learnable_temperature")) body.erase("learnable_temperature");
  if (!supports.declares("family")) body.erase("family");
  if (!supports.declares("strategy")) body.erase("strategy");
  if (!supports.replays_padding_draws) body.erase("padding_draws");
  OrderedJson request;
  request["id"] = id;
  request["case"] = std::move(body);
  return request.dump();
}

Response parse_response(std::string_view line, std::int64_t id, const Case& c) {
  const Json value = parse_line(line, "response");
  const Json& got = required(value, "response", "id");
  if (!got.is_number_integer() || got.get<std::int64_t>() != id) {
    throw OutOfStep(
        "response.id: expected " + std::to_string(id) + " (the request's), got " +
        (got.is_number_integer() ? std::to_string(got.get<std::int64_t>()) : kind_of(got)));
  }
  if (const auto it = value.find("error"); it != value.end()) {
    return {std::nullopt, read_string(*it, "response.error"), {}};
  }
  if (const auto it = value.find("declined"); it != value.end()) {
    const std::string reason = read_string(*it, "response.declined");
    if (reason.empty()) fail("response.declined", "expected a reason, got an empty string");
    return {std::nullopt, {}, reason};
  }
  return {read_result(value, c), {}, {}};
}

}  // namespace infonce::sut
