// `infonce-sim serve-sut [--mutant NAME]`: the harness's own rank program as
// an external system under test, speaking infonce-sut/1 on stdin/stdout
// (docs/sut-protocol.md). It is the deterministic SUT of the channel's tests:
// `check --sut "infonce-sim serve-sut"` passes, and under a mutant it fails
// as the campaign does under that mutant.
//
// A request that is not a JSON object with an id ends the session (exit 2):
// the harness never sends one. A case the step cannot run is an error response.
#include <iostream>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "casefile/case_json.hpp"
#include "cli/command.hpp"
#include "cli/tool_options.hpp"
#include "step/mutants.hpp"
#include "step/recorded_padding.hpp"
#include "step/run_case.hpp"
#include "sut/protocol.hpp"

namespace infonce::cli {
namespace {
namespace po = boost::program_options;
using Json = nlohmann::ordered_json;

Json handshake(const step::Mutant* mutant) {
  std::string name = "infonce-sim serve-sut (the harness's own rank program on fibers";
  name += mutant ? ", mutant " + std::string(mutant->name) + ")" : ")";
  // Per-rank generators with replicas would need every replica's draws
  // recorded (step/recorded_padding.hpp records the first): synced only.
  return {{"protocol", sut::kProtocol},
          {"name", name},
          {"supports",
           {{"use_batch", {true, false}},
            {"hard_negatives", true},
            {"padding", {"legacy", "fixed"}},
            {"mask_fake_negative", true},
            {"include_qq", true},
            {"include_dd", true},
            {"reductions", {"mean", "sum"}},
            {"gathers", {"object", "tensor"}},
            {"dtypes", {"float64", "float32"}},
            {"max_world", 64},
            {"max_replicas", 64},
            {"compensate_false", true},
            {"accumulation_normalize", {true, false}},
            {"rng_modes", {"synced"}},
            {"replays_padding_draws", true},
            {"extension_keys",
             {"dtype", "accumulation.window", "learnable_temperature", "strategy"}}}}};
}

Json matrix_json(const std::vector<double>& flat, std::int64_t rows, std::int64_t cols) {
  Json m = Json::array();
  for (std::int64_t r = 0; r < rows; ++r) {
    Json row = Json::array();
    for (std::int64_t f = 0; f < cols; ++f)
      row.push_back(flat[static_cast<std::size_t>(r * cols + f)]);
    m.push_back(std::move(row));
  }
  return m;  // NaN and infinities dump as null, as the protocol says
}

Json step_response(std::int64_t id, const Case& c, const step::Mutant* mutant) {
  const step::DistributedSetup setup = step::distributed_setup(c, mutant);
  const Case& run = setup.distributed_case();
  step::RunOptions options;
  options.share_identical_losses = true;
  const step::DistributedResult result = step::run_on_fibers(run, setup.variant, options);
  Json response = {{"id", id}, {"losses", result.losses}};
  response["grad"] = matrix_json(result.grads[0], c.embedding_dim(), c.feature_dim());
  const std::vector<std::string> names = direct_parameter_names(c);
  if (!names.empty()) {
    Json direct = Json::object();
    const auto first = static_cast<std::size_t>(c.weight.size());
    for (std::size_t i = 0; i < names.size(); ++i) direct[names[i]] = result.grads[0][first + i];
    response["direct"] = std::move(direct);
  }
  Json grads = Json::array();
  for (const auto& g : result.grads)
    grads.push_back(matrix_json(g, c.embedding_dim(), c.feature_dim()));
  response["grads"] = std::move(grads);
  // Every replica of DP shard d draws what its first replica draws (synced).
  const loss::RecordedDraws shards = step::record_padding_draws(run);
  Json draws = Json::array();
  for (const auto& micro : shards) {
    Json ranks = Json::array();
    for (std::int32_t w = 0; w < c.mesh.world; ++w) {
      ranks.push_back(micro[static_cast<std::size_t>(c.mesh.dp_rank(w))]);
    }
    draws.push_back(std::move(ranks));
  }
  response["padding_draws"] = std::move(draws);
  return response;
}

Json answer(const Json& request, const step::Mutant* mutant) {
  const std::int64_t id = request.at("id").get<std::int64_t>();
  try {
    const Case c = parse_case(request.at("case").dump());
    return step_response(id, c, mutant);
  } catch (const std::exception& e) {
    return {{"id", id}, {"error", e.what()}};
  }
}

int run_serve_sut(const CommandContext& context) {
  std::string mutant_name;
  po::options_description options("options");
  options.add_options()("mutant", po::value(&mutant_name)->value_name("NAME"),
                        "serve a known-wrong variant of the step");
  if (!parse_command_options(context, options)) return kExitOk;
  const step::Mutant* mutant = parse_mutant("serve-sut", mutant_name);
  context.out << handshake(mutant).dump() << std::endl;
  // The protocol's requests come on standard input, one per line.
  std::string line;
  while (std::getline(std::cin, line)) {
    const Json request = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (request.is_discarded() || !request.is_object() || !request.contains("id") ||
        !request["id"].is_number_integer()) {
      throw InputError("serve-sut: a request line that is not {\"id\": N, \"case\": ...}: " +
                       sut::shown_line(line));
    }
    context.out << answer(request, mutant).dump() << std::endl;
  }
  return kExitOk;
}

const RegisterCommand kServeSut{
    {"serve-sut", "[--mutant NAME]",
     "serve the harness's own step over infonce-sut/1 on stdin/stdout (a deterministic SUT)",
     run_serve_sut}};

}  // namespace
}  // namespace infonce::cli
