// The device mesh of MODEL.md section 3: W = P x R ranks, world rank w holds DP
// shard d = w / R and replica index r = w % R (the replicas of one shard are
// neighbours). DP group of w = {r, r + R, ..., r + (P-1)R}; w's position in it
// is its DP rank d. This is the convention of casefile/case.hpp's Mesh.
#pragma once

#include <cstdint>

#include "sim/communicator.hpp"

namespace infonce::sim {

// Group ids handed out by the mesh helpers. split() numbers its groups from 1
// upwards, well below these; the world group is 0.
inline constexpr std::int32_t kDpGroupIdBase = 1 << 24;
inline constexpr std::int32_t kReplicaGroupIdBase = 2 << 24;

// A validated mesh (InputError naming `world`/`dp` unless 1 <= dp, dp | world).
class MeshLayout {
 public:
  MeshLayout(std::int32_t world, std::int32_t dp);

  std::int32_t world() const { return world_; }
  std::int32_t dp() const { return dp_; }
  std::int32_t replicas() const { return world_ / dp_; }

  std::int32_t dp_rank(std::int32_t world_rank) const;
  std::int32_t replica(std::int32_t world_rank) const;
  // The world rank holding DP shard `dp_rank` as replica `replica`.
  std::int32_t world_rank(std::int32_t dp_rank, std::int32_t replica) const;

  // {r, r+R, ..., r+(P-1)R} for r = replica(world_rank); id kDpGroupIdBase + r.
  Group dp_group(std::int32_t world_rank) const;
  // The R replicas of world_rank's DP shard {dR, ..., dR+R-1}; id kReplicaGroupIdBase + d.
  Group replica_group(std::int32_t world_rank) const;
  Group world_group() const;

 private:
  void check_rank(std::int32_t world_rank) const;
  std::int32_t world_;
  std::int32_t dp_;
};

// Free-function forms of the same convention.
std::int32_t dp_rank_of(std::int32_t world, std::int32_t dp, std::int32_t world_rank);
std::int32_t replica_of(std::int32_t world, std::int32_t dp, std::int32_t world_rank);
Group dp_group_of(std::int32_t world, std::int32_t dp, std::int32_t world_rank);
Group world_group_of(std::int32_t world);

}  // namespace infonce::sim
