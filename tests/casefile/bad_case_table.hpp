// The table of malformed case files: each entry is a whole file's text, the
// JSON path its one-line error message must start with, and words the message
// must contain. The same table drives parse_case (tests/casefile) and the
// infonce-sim binary (tests/cli: exit 2, one line on stderr). Add rows here.
#pragma once

#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace infonce::testing {

// A small valid case: world 4 (2 DP shards x 2 replicas), 2 micro-steps,
// F = 3, D = 2, hard_negatives 2 with recorded draws (micro-step 0 pads one
// group: the 1-negative group of shard 0).
inline constexpr std::string_view kValidCaseText =
    R"({"format":"infonce-case/1","mesh":{"world":4,"dp":2},"reduction":"mean",)"
    R"("gather":"object","compensate":true,)"
    R"("loss":{"temperature":0.1,"use_batch":true,"hard_negatives":2,"padding":"fixed",)"
    R"("mask_fake_negative":false,"fake_neg_margin":0.1,"include_qq":false,"include_dd":false},)"
    R"("encoder":{"normalize":true,"weight":[[1,0,0.5],[0,1,-0.5]]},)"
    R"("accumulation":{"steps":2,"normalize":true},"rng":{"mode":"synced","seed":7},)"
    R"("padding_draws":[[[0],[0]],[[],[]]],)"
    R"("batches":[[[[[1,2,3],[0.25,1,0],[1,1,1]]],[[[0,1,0],[1,0,0],[0,0,1],[2,2,2]]]],)"
    R"([[[[1,0,0],[0,1,0],[0,0,1],[1,1,0]]],[[[3,2,1],[1,2,3],[0,1,1],[1,0,1]]]]],)"
    R"("expect":{"loss":0.5,"grad":[[0,0,0],[0,0,0]],"rtol":1e-10,"atol":1e-12}})";

// A small valid SigLIP case (SPEC section 15): world 4 (2 DP shards x 2
// replicas), F_image = F_text = 2, D = 3, two pairs per shard.
inline constexpr std::string_view kValidSigLipCaseText =
    R"({"format":"infonce-case/1","family":"siglip","mesh":{"world":4,"dp":2},)"
    R"("reduction":"mean","gather":"tensor","compensate":true,)"
    R"("encoder":{"weight":[[0.3,-0.2,0.5,0.1],[0.7,0.4,-0.6,0.2],[0.1,0.9,0.3,-0.4]]},)"
    R"("siglip":{"image_features":2,"image_normalize":true,"text_normalize":false,)"
    R"("log_scale":1.2,"bias":-1.5,"batches":[[)"
    R"({"image":[[1,2],[0.5,-1]],"text":[[0.3,1],[2,-0.5]]},)"
    R"({"image":[[-1,0.2],[0.1,0.3]],"text":[[1,1],[-0.4,0.8]]}]]},)"
    R"("accumulation":{"steps":1,"normalize":true}})";

struct BadCase {
  std::string name;    // unique; also the file name in the CLI test
  std::string text;    // the whole case file
  std::string path;    // the message starts with "<path>: "
  std::string detail;  // ... and contains this
};

// GoogleTest prints a parameter with this (not as a dump of its bytes).
inline void PrintTo(const BadCase& bad, std::ostream* out) {
  *out << bad.name;
}

namespace bad_case_detail {

using Json = nlohmann::ordered_json;

inline Json valid_case() {
  return Json::parse(kValidCaseText);
}

// The valid case with values set (JSON pointer -> value) and keys removed.
inline std::string edited(std::vector<std::pair<std::string, Json>> set,
                          std::vector<std::string> removed = {}) {
  Json document = valid_case();
  for (auto& [pointer, value] : set) document[Json::json_pointer(pointer)] = std::move(value);
  for (const std::string& pointer : removed) {
    const Json::json_pointer where(pointer);
    Json& parent = document.at(where.parent_pointer());
    if (parent.is_array()) {
      parent.erase(std::stoul(where.back()));
    } else {
      parent.erase(where.back());
    }
  }
  return document.dump();
}

// The valid text with one literal replaced (for what JSON values cannot
// express: 1e999, duplicate keys, syntax errors). `from` must occur once.
inline std::string replaced(std::string_view from, std::string_view to) {
  std::string text(kValidCaseText);
  const std::size_t at = text.find(from);
  if (at == std::string::npos || text.find(from, at + 1) != std::string::npos) {
    throw std::logic_error("bad_case_table: '" + std::string(from) + "' must occur exactly once");
  }
  text.replace(at, from.size(), to);
  return text;
}

// The valid SigLIP case with values set (JSON pointer -> value) and keys removed.
inline std::string edited_siglip(std::vector<std::pair<std::string, Json>> set,
                                 std::vector<std::string> removed = {}) {
  Json document = Json::parse(kValidSigLipCaseText);
  for (auto& [pointer, value] : set) document[Json::json_pointer(pointer)] = std::move(value);
  for (const std::string& pointer : removed) {
    const Json::json_pointer where(pointer);
    document.at(where.parent_pointer()).erase(where.back());
  }
  return document.dump();
}

inline Json repeated(const Json& element, std::size_t count) {
  Json array = Json::array();
  for (std::size_t i = 0; i < count; ++i) array.push_back(element);
  return array;
}

inline std::string repeated_text(std::string_view unit, std::size_t count) {
  std::string text;
  for (std::size_t i = 0; i < count; ++i) text += unit;
  return text;
}

}  // namespace bad_case_detail

inline std::vector<BadCase> bad_cases() {
  using namespace bad_case_detail;
  const Json row = Json::array({1, 0, 0});
  const Json group = Json::array({row, row, row});  // q, p, 1 negative
  return {
      // --- JSON syntax and structure
      {"empty_file", "", "(top level)", "invalid JSON"},
      {"not_an_object", "[1, 2]", "(top level)", "expected an object, got an array of 2"},
      {"truncated_in_batches",
       std::string(kValidCaseText.substr(0, kValidCaseText.find("[[3,2,1]") + 4)),
       "batches[1][1][0][0][1]", "unexpected end of input"},
      {"trailing_garbage", std::string(kValidCaseText) + " x", "(top level)", "invalid JSON"},
      {"bad_number_literal", replaced("\"seed\":7", "\"seed\":07"), "rng.seed", "invalid JSON"},
      {"nan_literal", replaced("\"temperature\":0.1", "\"temperature\":NaN"), "loss.temperature",
       "invalid JSON"},
      {"duplicate_key", replaced("\"world\":4", "\"world\":4,\"world\":2"), "mesh.world",
       "duplicate key"},
      {"nested_too_deep",
       replaced("\"seed\":7", "\"seed\":" + repeated_text("[", 100) + repeated_text("]", 100)),
       "rng.seed" + repeated_text("[0]", 63), "nested deeper than 64 levels"},
      {"invalid_utf8", replaced("\"synced\"", "\"sync\xff\""), "rng.mode", "invalid JSON"},
      // --- keys
      {"unknown_top_level_key", edited({{"/extra", 1}}), "extra", "unknown key"},
      {"unknown_loss_key", edited({{"/loss/tempreature", 0.1}}), "loss.tempreature", "unknown key"},
      {"unknown_key_with_newline", edited({{"/mesh/a\nb", 1}}), "mesh[\"a\\nb\"]", "unknown key"},
      {"unknown_expect_key", edited({{"/expect/tolerance", 1}}), "expect.tolerance", "unknown key"},
      {"missing_format", edited({}, {"/format"}), "format", "missing required key"},
      {"missing_mesh_dp", edited({}, {"/mesh/dp"}), "mesh.dp", "missing required key"},
      {"missing_include_dd", edited({}, {"/loss/include_dd"}), "loss.include_dd",
       "missing required key"},
      {"missing_encoder_normalize", edited({}, {"/encoder/normalize"}), "encoder.normalize",
       "missing required key"},
      {"missing_batches", edited({}, {"/batches"}), "batches", "missing required key"},
      {"missing_expect_loss", edited({}, {"/expect/loss"}), "expect.loss", "missing required key"},
      // --- types and values
      {"wrong_format", edited({{"/format", "infonce-case/2"}}), "format",
       "expected \"infonce-case/1\", got the string \"infonce-case/2\""},
      {"world_zero", edited({{"/mesh/world", 0}}), "mesh.world", "must be >= 1, got 0"},
      {"world_string", edited({{"/mesh/world", "4"}}), "mesh.world",
       "expected an integer, got the string \"4\""},
      {"world_fraction", edited({{"/mesh/world", 2.5}}), "mesh.world",
       "expected an integer, got 2.5"},
      {"world_beyond_int32", edited({{"/mesh/world", 99999999999}}), "mesh.world",
       "outside the 32-bit integer range"},
      {"world_above_limit", edited({{"/mesh/world", 65537 * 2}, {"/mesh/dp", 2}}), "mesh.world",
       "131074 is above the limit 65536"},
      {"dp_zero", edited({{"/mesh/dp", 0}}), "mesh.dp", "must be >= 1, got 0"},
      {"dp_not_dividing_world", edited({{"/mesh/dp", 3}}), "mesh.dp",
       "3 does not divide mesh.world = 4"},
      {"reduction_unknown", edited({{"/reduction", "avg"}}), "reduction",
       "expected \"mean\" or \"sum\", got the string \"avg\""},
      {"gather_number", edited({{"/gather", 1}}), "gather", "expected \"object\" or \"tensor\""},
      {"compensate_string", edited({{"/compensate", "yes"}}), "compensate",
       "expected true or false"},
      {"temperature_zero", edited({{"/loss/temperature", 0}}), "loss.temperature",
       "must be > 0, got 0"},
      {"temperature_negative_zero", replaced("\"temperature\":0.1", "\"temperature\":-0.0"),
       "loss.temperature", "must be > 0"},
      {"temperature_negative", edited({{"/loss/temperature", -0.1}}), "loss.temperature",
       "must be > 0, got -0.1"},
      {"temperature_overflow", replaced("\"temperature\":0.1", "\"temperature\":1e999"),
       "loss.temperature", "expected a finite number: number overflow parsing '1e999'"},
      {"margin_overflow", replaced("\"fake_neg_margin\":0.1", "\"fake_neg_margin\":-1e999"),
       "loss.fake_neg_margin", "expected a finite number: number overflow parsing '-1e999'"},
      {"hard_negatives_zero", edited({{"/loss/hard_negatives", 0}}), "loss.hard_negatives",
       "must be >= 1, got 0"},
      {"hard_negatives_fraction", edited({{"/loss/hard_negatives", 2.0}}), "loss.hard_negatives",
       "expected null or an integer >= 1, got 2.0"},
      {"hard_negatives_above_limit", edited({{"/loss/hard_negatives", 5000}}),
       "loss.hard_negatives", "5000 is above the limit 4096"},
      {"padding_unknown", edited({{"/loss/padding", "legacy2"}}), "loss.padding",
       "expected \"legacy\" or \"fixed\""},
      {"use_batch_null", edited({{"/loss/use_batch", nullptr}}), "loss.use_batch",
       "expected true or false, got null"},
      {"steps_zero", edited({{"/accumulation/steps", 0}}), "accumulation.steps",
       "must be >= 1, got 0"},
      {"steps_above_limit", edited({{"/accumulation/steps", 1025}}), "accumulation.steps",
       "1025 is above the limit 1024"},
      {"window_zero", edited({{"/accumulation/window", 0}}), "accumulation.window",
       "must be >= 1, got 0"},
      {"window_above_steps", edited({{"/accumulation/window", 3}}), "accumulation.window",
       "3 is above the limit 2"},
      {"window_fraction", edited({{"/accumulation/window", 1.5}}), "accumulation.window",
       "expected an integer"},
      {"window_leaves_data_out", edited({{"/accumulation/window", 1}}), "batches[1]",
       "outside accumulation.window: must be empty"},
      {"window_leaves_draws_out",
       edited({{"/accumulation/window", 1},
               {"/batches/1", Json::array({Json::array(), Json::array()})},
               {"/padding_draws/1/0", Json::array({0})}}),
       "padding_draws[1]", "outside accumulation.window: must be empty"},
      {"rng_mode_unknown", edited({{"/rng/mode", "global"}}), "rng.mode",
       "expected \"synced\" or \"per-rank\""},
      {"seed_negative", edited({{"/rng/seed", -1}}), "rng.seed", "must be >= 0, got -1"},
      {"seed_fraction", edited({{"/rng/seed", 1.5}}), "rng.seed", "expected an integer"},
      {"dtype_unknown", edited({{"/dtype", "float16"}}), "dtype",
       "expected \"float64\" or \"float32\""},
      // --- strategy (extension key)
      {"strategy_gather_unknown",
       edited({{"/strategy", {{"gather", "sharded"}, {"scope", "global"}, {"scale", "P"}}}}),
       "strategy.gather", "expected \"detached-own-live\" or \"detached\" or \"autograd\""},
      {"strategy_scope_missing", edited({{"/strategy", {{"gather", "autograd"}, {"scale", "P"}}}}),
       "strategy.scope", "missing required key"},
      {"strategy_scale_number",
       edited({{"/strategy", {{"gather", "autograd"}, {"scope", "local"}, {"scale", 2}}}}),
       "strategy.scale", "expected \"none\" or \"P\" or \"W\", got 2"},
      {"strategy_unknown_key",
       edited({{"/strategy",
                {{"gather", "autograd"}, {"scope", "local"}, {"scale", "P"}, {"world", 2}}}}),
       "strategy.world", "unknown key"},
      {"strategy_reduction_disagrees",
       edited(
           {{"/strategy",
             {{"gather", "autograd"}, {"scope", "local"}, {"scale", "P"}, {"reduction", "sum"}}}}),
       "strategy.reduction", "disagrees with the case's reduction \"mean\""},
      {"strategy_without_compensate",
       edited({{"/compensate", false},
               {"/strategy", {{"gather", "autograd"}, {"scope", "local"}, {"scale", "none"}}}}),
       "compensate", "must be true with a strategy key"},
      // --- encoder.weight
      {"weight_ragged", edited({{"/encoder/weight/1", Json::array({0, 1})}}), "encoder.weight[1]",
       "expected 3 numbers (F, the length of encoder.weight[0]), got 2"},
      {"weight_no_rows", edited({{"/encoder/weight", Json::array()}}), "encoder.weight",
       "expected at least 1 row"},
      {"weight_empty_row", edited({{"/encoder/weight", Json::array({Json::array()})}}),
       "encoder.weight[0]", "expected at least 1 number"},
      {"weight_string_entry", edited({{"/encoder/weight/0/1", "0"}}), "encoder.weight[0][1]",
       "expected a number, got the string \"0\""},
      {"weight_overflow", replaced("[[1,0,0.5]", "[[1,1e999,0.5]"), "encoder.weight[0][1]",
       "expected a finite number"},
      {"weight_too_wide", edited({{"/encoder/weight", Json::array({repeated(1, 4097)})}}),
       "encoder.weight[0]", "4097 numbers (F), above the limit 4096"},
      {"weight_too_tall", edited({{"/encoder/weight", repeated(row, 4097)}}), "encoder.weight",
       "4097 rows (D), above the limit 4096"},
      // --- batches: shapes
      {"batches_object", edited({{"/batches", Json::object()}}), "batches",
       "expected an array, got an object"},
      {"batches_micro_count", edited({{"/accumulation/steps", 3}}, {"/padding_draws"}), "batches",
       "expected 3 micro-steps (accumulation.steps), got 2"},
      {"batches_dp_count", edited({{"/mesh/dp", 1}}, {"/padding_draws"}), "batches[0]",
       "expected 1 DP shards (mesh.dp), got 2"},
      {"row_too_short", edited({{"/batches/0/1/0/2", Json::array({0, 1})}}), "batches[0][1][0][2]",
       "expected 3 numbers (F), got 2"},
      {"row_not_array", edited({{"/batches/0/0/0/0", 5}}), "batches[0][0][0][0]",
       "expected an array, got 5"},
      {"group_of_one_row", edited({{"/batches/1/0/0", Json::array({row})}}), "batches[1][0][0]",
       "a group needs at least 2 rows (q, p), got 1"},
      {"feature_overflow", replaced("[0.25,1,0]", "[1e999,1,0]"), "batches[0][0][0][1][0]",
       "expected a finite number"},
      {"feature_null", edited({{"/batches/1/1/0/3/2", nullptr}}), "batches[1][1][0][3][2]",
       "expected a number, got null"},
      {"zero_groups_everywhere",
       edited({{"/batches", Json::array({Json::array({Json::array(), Json::array()}),
                                         Json::array({Json::array(), Json::array()})})}}),
       "batches[0]", "no DP shard has a group"},
      {"local_loss_empty_shard",
       edited({{"/loss/use_batch", false}, {"/batches/0/1", Json::array()}}), "batches[0][1]",
       "no group"},
      {"hard_negatives_zero_negative_group", edited({{"/batches/1/0/0", Json::array({row, row})}}),
       "batches[1][0][0]", "loss.hard_negatives needs >= 1 negative per group"},
      {"group_too_many_negatives", edited({{"/batches/0/0/0", repeated(row, 4099)}}),
       "batches[0][0][0]", "4097 negatives, above the limit 4096"},
      {"shard_too_many_groups", edited({{"/batches/0/0", repeated(group, 65537)}}), "batches[0][0]",
       "65537 groups, above the limit 65536"},
      {"logits_above_limit",
       edited({{"/loss/hard_negatives", nullptr},
               {"/batches/0", Json::array({repeated(group, 3000), repeated(group, 3000)})}},
              {"/padding_draws"}),
       "batches[0]", "72000000 logit entries, above the limit 67108864"},
      // --- padding_draws
      {"draws_micro_count", edited({{"/padding_draws", Json::array({Json::array({0, 0})})}}),
       "padding_draws", "expected 2 micro-steps (accumulation.steps), got 1"},
      {"draws_dp_count", edited({{"/padding_draws/1", Json::array({Json::array()})}}),
       "padding_draws[1]", "expected 2 DP shards (mesh.dp), got 1"},
      {"draws_negative", edited({{"/padding_draws/0/1/0", -1}}), "padding_draws[0][1][0]",
       "must be >= 0, got -1"},
      {"draws_fraction", edited({{"/padding_draws/0/0/0", 0.5}}), "padding_draws[0][0][0]",
       "expected an integer, got 0.5"},
      // --- expect
      {"expect_grad_shape", edited({{"/expect/grad", Json::array({row})}}), "expect.grad",
       "expected 2 rows (D, the rows of encoder.weight), got 1"},
      {"expect_grad_ragged", edited({{"/expect/grad/1", Json::array({0, 0})}}), "expect.grad[1]",
       "expected 3 numbers (F, the columns of encoder.weight), got 2"},
      {"expect_rtol_negative", edited({{"/expect/rtol", -1e-10}}), "expect.rtol", "must be >= 0"},
      {"expect_loss_overflow", replaced("\"loss\":0.5", "\"loss\":1e999"), "expect.loss",
       "expected a finite number"},
      // --- the extension key "found" (a campaign's record of how it found the case)
      {"found_unknown_key",
       edited(
           {{"/found",
             Json::parse(R"({"mutant":null,"property":"p","seed":1,"case_index":0,"extra":1})")}}),
       "found.extra", "unknown key"},
      {"found_missing_property",
       edited({{"/found", Json::parse(R"({"mutant":null,"seed":1,"case_index":0})")}}),
       "found.property", "missing required key"},
      {"found_negative_case_index",
       edited({{"/found",
                Json::parse(R"({"mutant":"ga-twice","property":"p","seed":1,"case_index":-3})")}}),
       "found.case_index", "must be >= 0, got -3"},
      {"found_mutant_with_space",
       edited({{"/found",
                Json::parse(R"({"mutant":"ga twice","property":"p","seed":1,"case_index":0})")}}),
       "found.mutant", "printable characters without spaces"},
      {"found_limits_unknown",
       edited({{"/found",
                Json::parse(
                    R"({"mutant":null,"property":"p","seed":1,"case_index":0,"limits":"huge"})")}}),
       "found.limits", "expected \"default\" or \"typical\""},
      // --- the SigLIP family (SPEC section 15)
      {"siglip_unknown_key", edited_siglip({{"/siglip/extra", 1}}), "siglip.extra", "unknown key"},
      {"siglip_missing_bias", edited_siglip({}, {"/siglip/bias"}), "siglip.bias",
       "missing required key"},
      {"siglip_image_features_zero", edited_siglip({{"/siglip/image_features", 0}}),
       "siglip.image_features", "expected 1 to 3"},
      {"siglip_image_features_every_column", edited_siglip({{"/siglip/image_features", 4}}),
       "siglip.image_features", "minus at least one text column"},
      {"siglip_encoder_normalize", edited_siglip({{"/encoder/normalize", true}}),
       "encoder.normalize", "unknown key"},
      {"siglip_missing_encoder", edited_siglip({}, {"/encoder"}), "encoder",
       "missing required key"},
      {"siglip_without_family", edited({{"/siglip", Json::object()}}), "siglip",
       "needs \"family\": \"siglip\""},
      {"siglip_with_loss_key", edited_siglip({{"/loss", Json::object()}}), "loss",
       "is not a key of a case with \"family\": \"siglip\""},
      {"siglip_learnable_temperature", edited_siglip({{"/learnable_temperature", true}}),
       "learnable_temperature", "is not a key of a case with \"family\": \"siglip\""},
      {"siglip_text_rows_differ",
       edited_siglip({{"/siglip/batches/0/0/text", Json::parse("[[0.3,1]]")}}),
       "siglip.batches[0][0].text", "has 1 rows, .image has 2"},
      {"siglip_text_width", edited_siglip({{"/siglip/batches/0/1/text/0", Json::parse("[1,1,1]")}}),
       "siglip.batches[0][1].text[0]", "3"},
      {"siglip_one_shard_for_two", edited_siglip({{"/siglip/batches/0", Json::parse("[]")}}),
       "siglip.batches[0]", "DP shards"},
      {"siglip_log_scale_overflows", edited_siglip({{"/siglip/log_scale", 51}}), "siglip.log_scale",
       "must be <= 50"},
      {"siglip_bias_not_number", edited_siglip({{"/siglip/bias", "low"}}), "siglip.bias",
       "expected a number"},
      {"siglip_partial_window",
       edited_siglip({{"/accumulation/window", 1}, {"/accumulation/steps", 1}}),
       "accumulation.window", "not supported for SigLIP"},
  };
}

}  // namespace infonce::testing
