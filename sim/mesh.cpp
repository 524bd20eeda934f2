#include "sim/mesh.hpp"

#include <numeric>
#include <string>
#include <vector>

#include "base/error.hpp"

namespace infonce::sim {

MeshLayout::MeshLayout(std::int32_t world, std::int32_t dp) : world_(world), dp_(dp) {
  if (world < 1) throw InputError("mesh: world must be >= 1, got " + std::to_string(world));
  if (dp < 1 || world % dp != 0) {
    throw InputError("mesh: dp must divide world (" + std::to_string(world) + "), got " +
                     std::to_string(dp));
  }
}

void MeshLayout::check_rank(std::int32_t world_rank) const {
  if (world_rank < 0 || world_rank >= world_) {
    throw InputError("mesh: world rank " + std::to_string(world_rank) + " is outside 0.." +
                     std::to_string(world_ - 1));
  }
}

std::int32_t MeshLayout::dp_rank(std::int32_t world_rank) const {
  check_rank(world_rank);
  return world_rank / replicas();
}

std::int32_t MeshLayout::replica(std::int32_t world_rank) const {
  check_rank(world_rank);
  return world_rank % replicas();
}

std::int32_t MeshLayout::world_rank(std::int32_t dp_rank, std::int32_t replica) const {
  if (dp_rank < 0 || dp_rank >= dp_ || replica < 0 || replica >= replicas()) {
    throw InputError("mesh: no rank with dp rank " + std::to_string(dp_rank) + " and replica " +
                     std::to_string(replica));
  }
  return dp_rank * replicas() + replica;
}

Group MeshLayout::dp_group(std::int32_t world_rank) const {
  const std::int32_t r = replica(world_rank);
  Group group{kDpGroupIdBase + r, {}};
  group.world_ranks.reserve(static_cast<std::size_t>(dp_));
  for (std::int32_t d = 0; d < dp_; ++d) group.world_ranks.push_back(d * replicas() + r);
  return group;
}

Group MeshLayout::replica_group(std::int32_t world_rank) const {
  const std::int32_t d = dp_rank(world_rank);
  Group group{kReplicaGroupIdBase + d, {}};
  group.world_ranks.reserve(static_cast<std::size_t>(replicas()));
  for (std::int32_t r = 0; r < replicas(); ++r) group.world_ranks.push_back(d * replicas() + r);
  return group;
}

Group MeshLayout::world_group() const {
  return world_group_of(world_);
}

std::int32_t dp_rank_of(std::int32_t world, std::int32_t dp, std::int32_t world_rank) {
  return MeshLayout(world, dp).dp_rank(world_rank);
}

std::int32_t replica_of(std::int32_t world, std::int32_t dp, std::int32_t world_rank) {
  return MeshLayout(world, dp).replica(world_rank);
}

Group dp_group_of(std::int32_t world, std::int32_t dp, std::int32_t world_rank) {
  return MeshLayout(world, dp).dp_group(world_rank);
}

Group world_group_of(std::int32_t world) {
  if (world < 1) throw InputError("mesh: world must be >= 1, got " + std::to_string(world));
  // Every rank asks for it (split, the DDP all-reduce): O(P) each, so one
  // pass without push_back's per-element checks.
  Group group{0, std::vector<std::int32_t>(static_cast<std::size_t>(world))};
  std::iota(group.world_ranks.begin(), group.world_ranks.end(), 0);
  return group;
}

}  // namespace infonce::sim
