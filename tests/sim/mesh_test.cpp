// The mesh convention (DESIGN.md, casefile/case.hpp's Mesh): w -> d = w / R,
// r = w % R; DP group of w = {r, r+R, ...}.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <set>

#include "base/error.hpp"
#include "sim/mesh.hpp"
#include "tests/rapidcheck_seed.hpp"

namespace infonce::sim {
namespace {

TEST(Mesh, SixRanksThreeShardsTwoReplicas) {
  const MeshLayout mesh(6, 3);
  EXPECT_EQ(mesh.replicas(), 2);
  EXPECT_EQ(mesh.dp_rank(3), 1);
  EXPECT_EQ(mesh.replica(3), 1);
  EXPECT_EQ(mesh.dp_rank(4), 2);
  EXPECT_EQ(mesh.replica(4), 0);
  EXPECT_EQ(mesh.dp_group(3).world_ranks, (std::vector<std::int32_t>{1, 3, 5}));
  EXPECT_EQ(mesh.dp_group(4).world_ranks, (std::vector<std::int32_t>{0, 2, 4}));
  EXPECT_EQ(mesh.dp_group(3).id, kDpGroupIdBase + 1);
  EXPECT_EQ(mesh.replica_group(3).world_ranks, (std::vector<std::int32_t>{2, 3}));
  EXPECT_EQ(mesh.replica_group(3).id, kReplicaGroupIdBase + 1);
  EXPECT_EQ(mesh.world_rank(2, 1), 5);
  EXPECT_EQ(mesh.world_group().world_ranks, (std::vector<std::int32_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(mesh.world_group().id, 0);
  EXPECT_EQ(dp_group_of(6, 3, 3).world_ranks, mesh.dp_group(3).world_ranks);
  EXPECT_EQ(dp_rank_of(6, 3, 5), 2);
  EXPECT_EQ(replica_of(6, 3, 5), 1);
}

TEST(Mesh, PureDataParallel) {
  const MeshLayout mesh(4, 4);
  EXPECT_EQ(mesh.dp_group(2).world_ranks, (std::vector<std::int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(mesh.dp_rank(2), 2);
  EXPECT_EQ(mesh.replica(2), 0);
}

TEST(Mesh, InvalidMeshesAreInputErrors) {
  EXPECT_THROW(MeshLayout(6, 4), InputError);
  EXPECT_THROW(MeshLayout(6, 0), InputError);
  EXPECT_THROW(MeshLayout(0, 1), InputError);
  EXPECT_THROW(MeshLayout(6, 3).dp_rank(6), InputError);
  EXPECT_THROW(MeshLayout(6, 3).world_rank(3, 0), InputError);
}

RC_GTEST_PROP(Mesh, DpGroupsPartitionTheWorldAndPlaceEachRankAtItsDpRank, ()) {
  const auto dp = *rc::gen::inRange(1, 9);
  const auto replicas = *rc::gen::inRange(1, 9);
  const MeshLayout mesh(dp * replicas, dp);
  std::set<std::int32_t> covered;
  for (std::int32_t w = 0; w < mesh.world(); ++w) {
    const Group group = mesh.dp_group(w);
    RC_ASSERT(group.size() == dp);
    RC_ASSERT(group.world_ranks[static_cast<std::size_t>(mesh.dp_rank(w))] == w);
    RC_ASSERT(group.rank_of(w) == mesh.dp_rank(w));
    RC_ASSERT(mesh.world_rank(mesh.dp_rank(w), mesh.replica(w)) == w);
    for (const std::int32_t member : group.world_ranks)
      RC_ASSERT(mesh.replica(member) == mesh.replica(w));
    const Group replicas_of_shard = mesh.replica_group(w);
    for (const std::int32_t member : replicas_of_shard.world_ranks) {
      RC_ASSERT(mesh.dp_rank(member) == mesh.dp_rank(w));
    }
    if (group.world_ranks[0] == w)
      covered.insert(group.world_ranks.begin(), group.world_ranks.end());
  }
  RC_ASSERT(static_cast<std::int32_t>(covered.size()) == mesh.world());
}

}  // namespace
}  // namespace infonce::sim
