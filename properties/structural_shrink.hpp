// Shrinks of a case's structure that RapidCheck's own shrinking cannot reach.
// The generator draws the mesh before the shards' groups, and RapidCheck
// replays recorded choices by position, so lowering P or W reshuffles every
// group that follows: a failure that needs three groups can stay at W = 10
// with seven empty DP shards (issue 30). These candidates change the spec
// directly, keeping what the failure may need:
//   - one rank: every shard's groups in one shard, W = P = 1 (with use_batch
//     the global batch, in DP order, is unchanged: the same features are drawn);
//   - no replicas: W = P;
//   - no empty shards: every DP shard without a group in any micro-step dropped;
//   - one shard fewer: shard d's groups appended to shard d - 1 (use_batch), or
//     shard d dropped with its groups.
// Every candidate is a spec the generator could have drawn (valid_spec).
#pragma once

#include <vector>

#include "properties/case_spec.hpp"
#include "properties/restriction.hpp"

namespace infonce::properties {

// Candidates in the order to try them, most aggressive first; none equals
// `spec`. Under a restriction each is mapped into it (restrict_spec).
std::vector<CaseSpec> structural_shrinks(const CaseSpec& spec, const Restriction& restriction);

// Whether `spec` meets the generator's invariants: W a multiple of P, a group
// in every micro-step (in every shard without use_batch), per-rank generators
// only where the step keeps one objective.
bool valid_spec(const CaseSpec& spec);

}  // namespace infonce::properties
