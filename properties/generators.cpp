#include "properties/generators.hpp"

#include <algorithm>
#include <array>
#include <climits>

namespace infonce::properties {
namespace {

// Every choice inside gen::exec is an int from one generator shape, clamped
// to its range: when shrinking changes the structure (fewer micro-steps,
// ranks or groups), RapidCheck replays recorded values by position, and a
// value recorded for one choice may land on another. Clamping keeps every
// replayed value valid; uniform types keep the replay type-safe.
//
// `pick` is uniform whatever the size parameter (flags, choices, the mesh);
// `pick_sized` grows with it (RapidCheck's convention), so a campaign's early
// cases have few groups, negatives and dimensions.
int pick(int lo, int hi) {
  return std::clamp(*rc::gen::resize(rc::kNominalSize, rc::gen::inRange(lo, hi + 1)), lo, hi);
}
int pick_sized(int lo, int hi) {
  return std::clamp(*rc::gen::inRange(lo, hi + 1), lo, hi);
}
bool flip() {
  return pick(0, 1) == 1;
}

template <class T, std::size_t N>
T pick_from(const std::array<T, N>& choices) {
  return choices[static_cast<std::size_t>(pick(0, static_cast<int>(N) - 1))];
}

// Log-uniform up to `max`: small worlds are common, 64 still appears.
int pick_log_uniform(int max) {
  int exponent_max = 0;
  while ((1 << (exponent_max + 1)) <= max) ++exponent_max;
  const int cap = std::min(max, 1 << pick(0, exponent_max));
  return pick(1, cap);
}

std::vector<std::int32_t> pick_negatives(int groups, int min_k, int max_k, bool equal) {
  std::vector<std::int32_t> ks;
  const int shared = pick_sized(min_k, max_k);
  for (int g = 0; g < groups; ++g) ks.push_back(equal ? shared : pick_sized(min_k, max_k));
  return ks;
}

CaseSpec generate(const GeneratorLimits& limits) {
  // Choices that do not depend on the structure come first: shrinking the
  // mesh or a micro-step changes how many picks follow it, and RapidCheck
  // replays recorded picks by position, so anything drawn after the
  // structure would be reshuffled by every structural shrink.
  CaseSpec spec;
  spec.use_batch = !flip();  // shrinks toward use_batch = true, the mode of the bug
  spec.hard_negatives = flip() ? pick(1, limits.max_negatives) : 0;
  spec.accumulation_normalize = !flip();
  spec.normalize = !flip();
  spec.mask_fake_negative = flip();
  spec.fake_neg_margin = pick_from(std::array{0.1, 0.0, 0.05, 0.3, -0.05});
  spec.include_qq = flip();
  spec.include_dd = flip();
  spec.temperature = pick_from(std::array{0.1, 1.0, 0.5, 0.05, 2.0});
  spec.reduction = flip() ? Reduction::sum : Reduction::mean;
  spec.gather = flip() ? GatherPath::tensor : GatherPath::object;
  spec.scalar = flip() ? ScalarType::float32 : ScalarType::float64;
  spec.data_seed = static_cast<std::uint64_t>(*rc::gen::noShrink(rc::gen::inRange(0, INT_MAX)));
  spec.rng_seed = static_cast<std::uint64_t>(*rc::gen::noShrink(rc::gen::inRange(0, INT_MAX)));
  // Legitimate configurations that hunt for trouble. Each is drawn whatever
  // the structure (stable positions under shrinking) and shrinks toward the
  // plain case: compensation on, synced generators, a full accumulation
  // window, generated draws, normal features, rank-order reduction.
  spec.compensate = pick(0, 7) != 7;  // ~1/8: the trainer before the fix, gradient exactly 1/P
  const bool per_rank_wanted = pick(0, 3) == 3;
  const bool partial_window = pick(0, 3) == 3;
  const int idle_steps = pick(1, 2);
  const bool record_draws = flip();
  spec.draw_seed = static_cast<std::uint64_t>(*rc::gen::noShrink(rc::gen::inRange(0, INT_MAX)));
  const int style = pick(0, 9);  // half the cases normal, the rest one adversarial style each
  spec.features = style < 5 ? FeatureStyle::normal : static_cast<FeatureStyle>(style - 4);
  if (spec.features == FeatureStyle::threshold_ties) {
    spec.mask_fake_negative = true;  // the tie is with the mask threshold q.p + margin
    spec.fake_neg_margin = 0.0;
  }
  spec.schedule_seed = static_cast<std::uint64_t>(*rc::gen::noShrink(rc::gen::inRange(1, INT_MAX)));
  const bool permute_reduction = flip();
  const auto reduction_seed =
      static_cast<std::uint64_t>(*rc::gen::noShrink(rc::gen::inRange(1, INT_MAX)));
  spec.reduction_order_seed = permute_reduction ? reduction_seed : 0;
  // Normalised embeddings of F = 1 or D = 1 are all collinear (+-u): every
  // similarity is +-1 whatever W is, the exact gradient is zero, and a case
  // would compare rounding noise only. So normalised cases start at 2.
  const int min_dim = spec.normalize ? 2 : 1;
  spec.feature_dim = pick_sized(min_dim, std::max(min_dim, limits.max_dim));
  spec.embedding_dim = pick_sized(min_dim, std::max(min_dim, limits.max_dim));
  const bool equal_negatives = flip();

  spec.dp = pick_log_uniform(limits.max_world);
  spec.world = spec.dp * pick_log_uniform(std::max(1, limits.max_world / spec.dp));
  const int accumulation = pick(1, limits.max_accumulation);
  // Keep the global batch bounded so one case stays cheap at P = 64.
  const int max_groups = std::max(1, std::min(limits.max_groups, 64 / spec.dp));
  const int min_k = spec.hard_negatives > 0 ? 1 : 0;
  spec.negatives.clear();
  for (int m = 0; m < accumulation; ++m) {
    auto& shards = spec.negatives.emplace_back();
    bool any_group = false;
    for (int d = 0; d < spec.dp; ++d) {
      // Without use_batch every rank needs a group; with it only the whole
      // batch does, and any shard may be empty, rank 0's included.
      const int min_groups = spec.use_batch ? 0 : 1;
      shards.push_back(pick_negatives(pick_sized(min_groups, max_groups), min_k,
                                      limits.max_negatives, equal_negatives));
      any_group = any_group || !shards.back().empty();
    }
    if (!any_group) {
      shards.back() = pick_negatives(1, min_k, limits.max_negatives, equal_negatives);
    }
  }
  // A partial window needs configured steps beyond it (SPEC section 12).
  spec.idle_steps = partial_window ? idle_steps : 0;
  spec.record_draws = record_draws && spec.hard_negatives > 0;
  // Per-rank generators keep one objective when nothing is drawn (no padding,
  // or recorded draws), or when each rank pads only its own shard and has no
  // replica that would pad it differently.
  const bool one_objective =
      spec.hard_negatives == 0 || spec.record_draws || (!spec.use_batch && spec.world == spec.dp);
  spec.per_rank_rng = per_rank_wanted && one_objective;
  return spec;
}

}  // namespace

GeneratorLimits default_limits() {
  return {};
}

GeneratorLimits typical_limits() {
  return {.max_world = 8, .max_groups = 3, .max_negatives = 3, .max_dim = 6, .max_accumulation = 3};
}

rc::Gen<CaseSpec> case_spec_gen(const GeneratorLimits& limits) {
  if (limits.restriction == Restriction{}) {
    return rc::gen::exec([limits] { return generate(limits); });
  }
  // A restricted distribution: the mesh is drawn within the SUT's largest
  // world, then every spec (and every shrink of it) is mapped into the rest.
  GeneratorLimits inner = limits;
  inner.max_world = std::min(limits.max_world, limits.restriction.max_world);
  return rc::gen::map(rc::gen::exec([inner] { return generate(inner); }),
                      [restriction = limits.restriction](CaseSpec spec) {
                        return restrict_spec(std::move(spec), restriction);
                      });
}

}  // namespace infonce::properties
