// The distributed strategy of a contrastive step as one small value, and what
// the math predicts for it, per parameter group. A pure value type and pure
// functions: no ranks, no collectives. The derivation is written out in
// docs/strategies.md; tests/step/strategy_test.cpp checks every prediction
// against an independent brute-force multi-rank computation.
//
// Notation: P data-parallel shards, W = P x R world ranks (R replicas of each
// shard), rank d's loss l_d, the full-batch objective L, the encoders'
// rows E_d of rank d, the direct parameters phi (an InfoNCE inverse
// temperature, CLIP's log logit scale and bias).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "casefile/case.hpp"

namespace infonce::step {

// The value types live with the case file (casefile/strategy_value.hpp).
using infonce::BackwardScale;
using infonce::GatherGroup;
using infonce::GatherKind;
using infonce::LossScope;
using infonce::Strategy;

// The seed's fixed trainer, and before its fix.
inline constexpr Strategy kSeedFixed{};
inline constexpr Strategy kSeedBeforeFix{.gather = GatherKind::detached_own_live,
                                         .scope = LossScope::global,
                                         .scale = BackwardScale::none,
                                         .reduction = Reduction::mean};

// Every combination: 3 gathers x 2 scopes x 3 scales x 2 reductions x 2
// gather groups = 72; the 36 dp points first, in the order they had before
// the group axis, then the same 36 over the world group.
inline constexpr std::size_t kPointCount = 72;
inline constexpr std::size_t kDpPointCount = 36;
std::array<Strategy, kPointCount> all_strategies();
// The dp points alone (all_strategies()'s first 36).
std::array<Strategy, kDpPointCount> dp_strategies();

enum class ParameterGroup {
  encoders,  // the towers' weights (InfoNCE: W; CLIP: W_image and W_text)
  direct,    // parameters that enter the loss directly (1/T; CLIP's log scale and bias)
};

// What the prediction needs to know about the step.
struct StepShape {
  std::int32_t dp = 1;        // P
  std::int32_t world = 1;     // W = P x R
  bool equal_batches = true;  // every DP shard has the same number of queries (per micro-step)
  bool use_batch = true;      // false: no gather, each rank its own loss (SPEC section 2)
  // The loss compares a row with rows of its own side (InfoNCE's include_qq or
  // include_dd), or pads groups with random rows (hard negatives): a world
  // gather's replica copies then differ from a pure repetition.
  bool copies_interact = false;
};

enum class Verdict {
  correct,          // the step's gradient is the reference gradient
  ratio,            // it is exactly ratio x the reference gradient, ratio != 1
  no_single_ratio,  // no constant relates them
};

enum class NoRatioCause {
  none,
  dropped_terms,    // a local loss over a detached gather loses the cross-rank terms
  unequal_batches,  // a local loss weights each rank's queries by 1/n_d, the reference by 1/N
  replica_copies,   // a world gather's R copies of a shard meet each other (qq, dd, padding)
};

struct Prediction {
  Verdict verdict = Verdict::correct;
  double ratio = 1.0;  // when verdict != no_single_ratio
  NoRatioCause cause = NoRatioCause::none;
  // The verdict holds only because every shard has the same number of
  // queries (a local loss): with unequal batches it becomes no_single_ratio.
  bool depends_on_equal_batches = false;
};

// s: 1, P or W.
double backward_scale(BackwardScale scale, const StepShape& shape);

// The factor the gradient reduction applies to the sum over DP shards of the
// per-shard gradients: 1/P for the mean over W ranks (R identical replicas
// each), 1 for the sum over the DP group.
double reduction_factor(Reduction reduction, const StepShape& shape);

// The number b with sum over DP shards of the unscaled per-rank gradient =
// b x the reference gradient, for each gather x scope x group (P > 1, use_batch):
//                         encoders                    direct parameters
//   detached_own_live/global  1                        P
//   detached/global           0                        P
//   autograd/global           P                        P
//   detached_own_live/local   none (dropped terms)     P (equal batches)
//   detached/local            none (dropped terms)     P (equal batches)
//   autograd/local            P (equal batches)        P (equal batches)
// P = 1: no gather, b = 1. use_batch = false: no gather, each rank's own loss,
// against the mean of those losses (b = P) or their sum (b = 1, reduction sum).
// A world gather (group world, W > 1) differs only where a rank's own slot is
// live and the others are not: detached_own_live/global gives b = 1/R (its
// slot is one of R equal copies of its rows), detached_own_live/local has no
// single ratio; and with R > 1 a loss whose copies interact has none.
// The step's ratio is reduction_factor x backward_scale x b.
Prediction predict(const Strategy& strategy, ParameterGroup group, const StepShape& shape);

std::string_view name_of(GatherKind gather);
std::string_view name_of(LossScope scope);
std::string_view name_of(BackwardScale scale);
std::string_view name_of(Reduction reduction);
std::string_view name_of(GatherGroup group);
std::string_view name_of(ParameterGroup group);
std::string_view name_of(NoRatioCause cause);
// "gather/scope/scale/reduction", e.g. "detached-own-live/global/scale-P/mean";
// a world point's name adds "/world": "detached-own-live/global/scale-W/mean/world".
std::string name_of(const Strategy& strategy);
// "correct", "ratio 0.5", "no single ratio (dropped terms)", + " [equal batches]".
std::string describe(const Prediction& prediction);

}  // namespace infonce::step
