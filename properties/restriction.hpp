// What an external system under test can run (its handshake's `supports`),
// as a restriction of the generators: every generated CaseSpec is mapped into
// it, so the generators themselves stay as they are and shrinking stays
// inside it too. The default restricts nothing.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "casefile/case.hpp"

namespace infonce::properties {

struct CaseSpec;
struct GeneratorLimits;

struct Restriction {
  static constexpr std::int32_t kNoLimit = std::numeric_limits<std::int32_t>::max();
  // nullopt: both values; otherwise only this one.
  std::optional<bool> use_batch;
  std::optional<bool> accumulation_normalize;
  std::optional<Reduction> reduction;
  std::optional<GatherPath> gather;
  std::optional<ScalarType> scalar;
  bool hard_negatives = true;
  bool mask_fake_negative = true;
  bool include_qq = true;
  bool include_dd = true;
  std::int32_t max_world = kNoLimit;
  std::int32_t max_replicas = kNoLimit;
  bool compensate_false = true;  // cases without the fix (compensate: false) may be generated
  bool partial_window = true;    // cases with accumulation.window < steps may be generated
  std::int32_t min_dim = 1;      // F and D at least (a trainer may squeeze a dimension of 1 away)
  // The padding the cases ask for (the harness's own step: fixed).
  loss::Padding padding = loss::Padding::fixed;
  // Cases whose DP shards hold different numbers of groups in a micro-step,
  // whose queries hold different numbers of documents, whose ranks hold
  // different row counts in a micro-step, or with per-rank generators may be
  // generated.
  bool unequal_batches = true;
  bool unequal_documents = true;
  bool unequal_shapes = true;
  bool per_rank_rng = true;
  // The loss families generated (the harness's own campaign: InfoNCE); with
  // both, a case is CLIP when its data seed is odd (never shrunk, so a case
  // keeps its family while it shrinks). A CLIP case has a logit bias only
  // where `logit_bias` allows it.
  bool infonce = true;
  bool clip = false;
  bool ntxent = false;  // SPEC section 14; with several families, the data seed picks one
  bool siglip = false;  // SPEC section 15; likewise
  bool logit_bias = true;

  bool operator==(const Restriction&) const = default;
};

// `spec` moved into the restriction: a value outside it becomes the allowed
// one, too many replicas become the most allowed, and without use_batch a
// shard with no group gets one. The identity when nothing is restricted.
CaseSpec restrict_spec(CaseSpec spec, const Restriction& restriction);

// `c` as the restriction asks (the padding mode).
void restrict_case(Case& c, const Restriction& restriction);

// The family `spec` stands for under the restriction: of the allowed ones
// (InfoNCE, CLIP, NT-Xent, SigLIP, in that order), the one at data_seed mod their
// count (InfoNCE and CLIP: CLIP when the seed is odd).
enum class CaseFamily { infonce, clip, ntxent, siglip };
CaseFamily family_of(const CaseSpec& spec, const Restriction& restriction);
// Whether `spec` stands for a CLIP case under the restriction.
bool builds_clip(const CaseSpec& spec, const Restriction& restriction);
// The case `spec` stands for under the restriction: its family, and
// restrict_case. (The identity on build_case when nothing is restricted.)
Case build_restricted_case(const CaseSpec& spec, const Restriction& restriction);

// One line per restricted axis, against the generator's own distribution,
// e.g. "world <= 8 (the distribution has 64)", "gather: object only".
std::vector<std::string> restricted_axes(const Restriction& restriction,
                                         const GeneratorLimits& limits);

}  // namespace infonce::properties
