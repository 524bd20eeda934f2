// One data-parallel step, explicit enough for another framework to run it:
// the in-memory form of the `infonce-case/1` file (MODEL.md section 7).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "casefile/clip_case.hpp"
#include "casefile/ntxent_case.hpp"
#include "casefile/siglip_case.hpp"
#include "casefile/strategy_value.hpp"
#include "loss/matrix.hpp"
#include "loss/padding.hpp"
#include "loss/reference.hpp"
#include "loss/settings.hpp"

namespace infonce {

// World rank w holds DP shard w / replicas and replica index w % replicas:
// the replicas of one shard are neighbours, as tensor/sequence-parallel ranks
// usually are; DP group r is {r, r + R, r + 2R, ...}.
struct Mesh {
  std::int32_t world = 1;
  std::int32_t dp = 1;
  std::int32_t replicas() const { return world / dp; }
  std::int32_t dp_rank(std::int32_t world_rank) const { return world_rank / replicas(); }
  std::int32_t replica(std::int32_t world_rank) const { return world_rank % replicas(); }
};

enum class GatherPath { object, tensor };
enum class RngMode { synced, per_rank };
enum class ScalarType { float64, float32 };

struct Expectation {
  double loss = 0;
  Matrix<double> grad;  // D x F
  double rtol = 1e-10;
  double atol = 1e-12;
  // The direct parameters' gradients, in direct_parameter_names order; empty:
  // no claim about them (key expect.direct, optional).
  std::vector<double> direct;
};

// Extension key "found" (optional): how a property campaign found this case,
// so a corpus entry says what it guards against and can be regenerated.
struct Finding {
  std::optional<std::string> mutant;  // the known-wrong variant that failed it; none: the real step
  std::string property;               // the property that failed (properties/properties.hpp)
  std::uint64_t seed = 0;             // the campaign seed
  std::int64_t case_index = 0;        // the generated case that failed, before shrinking
  std::string limits = "default";     // the generator distribution: "default" | "typical"
};

struct Case {
  Mesh mesh;
  Reduction reduction = Reduction::mean;
  GatherPath gather = GatherPath::object;
  bool compensate = true;
  loss::LossSettings loss;
  bool encoder_normalize = true;
  Matrix<double> weight;  // D x F
  std::int32_t accumulation_steps = 1;
  // SPEC section 12: the last optimizer step of an epoch may run only the
  // first `window` of the configured micro-steps (key accumulation.window;
  // unset: all of them). batches and padding_draws still hold
  // accumulation_steps entries; those outside the window are empty.
  std::optional<std::int32_t> accumulation_window;
  bool accumulation_normalize = true;
  RngMode rng_mode = RngMode::synced;
  std::uint64_t rng_seed = 0;
  std::optional<loss::RecordedDraws> padding_draws;    // [micro][dp rank][draw]
  std::vector<std::vector<loss::ShardBatch>> batches;  // [micro][dp rank]
  std::optional<Expectation> expect;
  ScalarType scalar = ScalarType::float64;  // extension key "dtype", optional
  std::optional<Finding> found;             // extension key "found", optional
  // Extension key "strategy", optional: the distributed strategy, given
  // explicitly. Unset: the trainer's own (effective_strategy). Its reduction
  // is always the case's `reduction`.
  std::optional<Strategy> strategy;
  // Extension key "learnable_temperature", optional (default false): the
  // inverse temperature tau = 1 / loss.temperature is a parameter of the model,
  // and the step and the reference give d objective / d tau as well.
  bool learnable_temperature = false;
  // Extension key "family": "clip" with the "clip" object: the CLIP loss
  // family (casefile/clip_case.hpp). Unset: InfoNCE. A CLIP case has no
  // InfoNCE batches, settings or padding; `weight` holds both towers.
  std::optional<ClipSettings> clip;
  // Extension key "family": "ntxent" with the "ntxent" object: the NT-Xent
  // family (casefile/ntxent_case.hpp). Like a CLIP case, no InfoNCE batches,
  // settings or padding; `weight` is the shared encoder's.
  std::optional<NtXentSettings> ntxent;
  // Extension key "family": "siglip" with the "siglip" object: the SigLIP
  // family (casefile/siglip_case.hpp). No InfoNCE settings, generators or
  // batches; `weight` holds both towers (the root "encoder": {"weight"}).
  std::optional<SigLipSettings> siglip;

  // The micro-steps that run: the window, or every configured step.
  std::int32_t micro_steps_run() const { return accumulation_window.value_or(accumulation_steps); }
  std::int32_t feature_dim() const { return static_cast<std::int32_t>(weight.cols()); }
  std::int32_t embedding_dim() const { return static_cast<std::int32_t>(weight.rows()); }
};

// Limits on everything (TigerBeetle style): a case beyond them is rejected
// with an InputError instead of exhausting memory.
struct CaseLimits {
  static constexpr std::int32_t kMaxWorld = 65536;
  static constexpr std::int32_t kMaxAccumulationSteps = 1024;
  static constexpr std::int32_t kMaxGroupsPerShard = 1 << 16;
  static constexpr std::int32_t kMaxNegatives = 1 << 12;
  static constexpr std::int32_t kMaxDim = 1 << 12;
  static constexpr std::int64_t kMaxNumbers = std::int64_t{1} << 26;  // features in one case
  // Logit entries of one micro-step's loss after hard-negative resizing
  // (with use_batch the logit matrix is quadratic in the global group count).
  static constexpr std::int64_t kMaxLogits = std::int64_t{1} << 26;
};

// The parameters that enter the loss directly, in the order a step reports
// their gradients after the encoder weight's D x F entries (the flat gradient
// of step::RankOutput and step::DistributedResult): {"inverse_temperature"}
// with a learnable temperature (InfoNCE or NT-Xent); {"log_logit_scale"}
// and, when set, {"logit_bias"} for CLIP; {"log_scale", "bias"} for SigLIP;
// else none.
std::vector<std::string> direct_parameter_names(const Case& c);
inline std::size_t direct_parameter_count(const Case& c) {
  if (c.clip) return c.clip->logit_bias ? 2 : 1;
  if (c.siglip) return 2;
  return c.learnable_temperature ? 1 : 0;
}

// The strategy the step of `c` runs: the "strategy" key, or the trainer's
// (pattern A): the detached gather with the own slot live, the global loss,
// the mean or sum of `reduction`, and the backward scaled by P exactly where
// the fix compensates (compensate, use_batch and a mean reduction), else 1.
Strategy effective_strategy(const Case& c);

// Checks every invariant of a case that the file format cannot express
// (P divides W, shapes agree, dims within limits, finite numbers, T > 0, ...).
// Throws InputError naming the key.
void validate_case(const Case& c);

// The reference problem of a case (SPEC section 4) and its padding plan.
loss::ReferenceProblem reference_problem(const Case& c);
std::unique_ptr<loss::PaddingPlan> reference_padding(const Case& c);

// Seed of world rank w's hard-negative generator: one seed for all ranks in
// synced mode, seed + world rank in per-rank mode.
std::uint64_t padding_seed_of_rank(const Case& c, std::int32_t world_rank);

}  // namespace infonce
