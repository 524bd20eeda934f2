// The distributed strategy of a step as a plain value (issue 13): what the
// gather hands the loss, which queries the loss covers, the backward scale,
// and the DDP reduction. The case file's optional key "strategy" holds one
// (MODEL.md section 7); step/strategy.hpp predicts what each point gives and
// step/rank_program.cpp composes the rank program from it.
#pragma once

#include <array>
#include <cstddef>
#include <string_view>

namespace infonce {

enum class Reduction { mean, sum };

// What the gather of the embeddings hands the loss.
enum class GatherKind {
  detached_own_live,  // a detached all-gather, the rank's own slot put back live (the seed's fix)
  detached,           // a detached all-gather, no slot live (open_clip local_loss alone)
  autograd,           // an all-gather whose backward is a reduce-scatter (sum over ranks)
};

// Which queries a rank's loss covers.
enum class LossScope {
  global,  // every gathered query against every gathered document, targets on the global index
  local,   // the rank's own (live) queries against every gathered document, targets offset by
           // the rank's row prefix
};

// The factor s on the rank's backward signal (the reported loss is unscaled).
enum class BackwardScale { none, dp_shards, world_size };

// The process group the gather runs over (SPEC section 13).
enum class GatherGroup {
  dp,     // the rank's DP group: one member per distinct shard
  world,  // all W ranks: with R replicas, every shard R times in the gathered batch
};

struct Strategy {
  GatherKind gather = GatherKind::detached_own_live;
  LossScope scope = LossScope::global;
  BackwardScale scale = BackwardScale::dp_shards;
  Reduction reduction = Reduction::mean;  // DDP: mean over W ranks; Megatron per-token: sum over P
  GatherGroup group = GatherGroup::dp;

  friend bool operator==(const Strategy&, const Strategy&) = default;
};

// The names of the values, as the case file's key "strategy" writes them
// (step::name_of joins the same names into a point's name, except the scale's,
// which it writes "scale-1", "scale-P", "scale-W", and the group's: a world
// point's name ends in "/world", a dp point's has no suffix). Case files and the CLI's
// output depend on them: byte for byte. A table's order is the order the case
// file's error message lists the choices in.
template <class Enum>
struct EnumName {
  Enum value;
  std::string_view name;
};

inline constexpr std::array<EnumName<GatherKind>, 3> kGatherKindNames{{
    {GatherKind::detached_own_live, "detached-own-live"},
    {GatherKind::detached, "detached"},
    {GatherKind::autograd, "autograd"},
}};
inline constexpr std::array<EnumName<LossScope>, 2> kLossScopeNames{{
    {LossScope::global, "global"},
    {LossScope::local, "local"},
}};
inline constexpr std::array<EnumName<BackwardScale>, 3> kBackwardScaleNames{{
    {BackwardScale::none, "none"},
    {BackwardScale::dp_shards, "P"},
    {BackwardScale::world_size, "W"},
}};
inline constexpr std::array<EnumName<GatherGroup>, 2> kGatherGroupNames{{
    {GatherGroup::dp, "dp"},
    {GatherGroup::world, "world"},
}};
inline constexpr std::array<EnumName<Reduction>, 2> kReductionNames{{
    {Reduction::mean, "mean"},
    {Reduction::sum, "sum"},
}};

// The name of `value` in `names`; empty when the table lacks it.
template <class Enum, std::size_t N>
constexpr std::string_view name_in(const std::array<EnumName<Enum>, N>& names, Enum value) {
  for (const EnumName<Enum>& entry : names) {
    if (entry.value == value) return entry.name;
  }
  return {};
}

}  // namespace infonce
