#include "properties/structural_shrink.hpp"

#include <algorithm>
#include <cstdint>

#include "base/assert.hpp"

namespace infonce::properties {
namespace {

using Shards = std::vector<std::vector<std::int32_t>>;  // [dp rank][group] -> k

std::int32_t replicas_of(const CaseSpec& spec) {
  return spec.world / spec.dp;
}

// `spec` with the shards of every micro-step replaced by `reshape(shards)`,
// P set to the new shard count and W to P times the replicas.
template <class Reshape>
CaseSpec reshaped(const CaseSpec& spec, Reshape reshape) {
  CaseSpec out = spec;
  for (Shards& shards : out.negatives) shards = reshape(shards);
  out.dp = static_cast<std::int32_t>(out.negatives.front().size());
  out.world = out.dp * replicas_of(spec);
  return out;
}

// Every shard's groups, in DP order, in one shard.
Shards all_in_one(const Shards& shards) {
  std::vector<std::int32_t> one;
  for (const auto& shard : shards) one.insert(one.end(), shard.begin(), shard.end());
  return {one};
}

bool empty_everywhere(const CaseSpec& spec, std::size_t d) {
  return std::all_of(spec.negatives.begin(), spec.negatives.end(),
                     [d](const Shards& shards) { return shards[d].empty(); });
}

Shards without_shard(const Shards& shards, std::size_t d) {
  Shards out = shards;
  out.erase(out.begin() + static_cast<std::ptrdiff_t>(d));
  return out;
}

Shards merged_into_previous(const Shards& shards, std::size_t d) {
  INFONCE_ASSERT(d >= 1 && d < shards.size());
  Shards out = shards;
  out[d - 1].insert(out[d - 1].end(), out[d].begin(), out[d].end());
  out.erase(out.begin() + static_cast<std::ptrdiff_t>(d));
  return out;
}

void add_shard_drops(const CaseSpec& spec, std::vector<CaseSpec>& out) {
  const std::size_t dp = static_cast<std::size_t>(spec.dp);
  // Every empty shard at once, then one shard at a time from the last.
  std::vector<std::size_t> empty;
  for (std::size_t d = 0; d < dp; ++d) {
    if (empty_everywhere(spec, d)) empty.push_back(d);
  }
  if (!empty.empty() && empty.size() < dp) {
    out.push_back(reshaped(spec, [&](const Shards& shards) {
      Shards kept;
      for (std::size_t d = 0; d < shards.size(); ++d) {
        if (!std::binary_search(empty.begin(), empty.end(), d)) kept.push_back(shards[d]);
      }
      return kept;
    }));
  }
  for (std::size_t d = dp; d-- > 1;) {
    if (spec.use_batch) {
      out.push_back(reshaped(spec, [d](const Shards& s) { return merged_into_previous(s, d); }));
    }
  }
  for (std::size_t d = dp; dp > 1 && d-- > 0;) {
    out.push_back(reshaped(spec, [d](const Shards& s) { return without_shard(s, d); }));
  }
}

}  // namespace

bool valid_spec(const CaseSpec& spec) {
  if (spec.dp < 1 || spec.world < spec.dp || spec.world % spec.dp != 0) return false;
  if (spec.negatives.empty()) return false;
  for (const Shards& shards : spec.negatives) {
    if (static_cast<std::int32_t>(shards.size()) != spec.dp) return false;
    const bool any_group =
        std::any_of(shards.begin(), shards.end(), [](const auto& s) { return !s.empty(); });
    const bool every_shard =
        std::all_of(shards.begin(), shards.end(), [](const auto& s) { return !s.empty(); });
    if (!any_group || (!spec.use_batch && !every_shard)) return false;
  }
  const bool one_objective = spec.hard_negatives == 0 || spec.record_draws ||
                             (!spec.use_batch && spec.world == spec.dp);
  return !spec.per_rank_rng || one_objective;
}

std::vector<CaseSpec> structural_shrinks(const CaseSpec& spec, const Restriction& restriction) {
  std::vector<CaseSpec> candidates;
  if (spec.dp > 1 || spec.world > 1) {
    CaseSpec one = spec.use_batch ? reshaped(spec, all_in_one)
                                  : reshaped(spec, [](const Shards& s) { return Shards{s[0]}; });
    one.world = 1;
    candidates.push_back(std::move(one));
  }
  if (spec.world > spec.dp) {
    CaseSpec no_replicas = spec;
    no_replicas.world = spec.dp;
    candidates.push_back(std::move(no_replicas));
  }
  add_shard_drops(spec, candidates);
  const std::string original = describe(spec);
  std::vector<CaseSpec> out;
  for (CaseSpec& candidate : candidates) {
    CaseSpec restricted = restriction == Restriction{}
                              ? std::move(candidate)
                              : restrict_spec(std::move(candidate), restriction);
    if (valid_spec(restricted) && describe(restricted) != original) {
      out.push_back(std::move(restricted));
    }
  }
  return out;
}

}  // namespace infonce::properties
