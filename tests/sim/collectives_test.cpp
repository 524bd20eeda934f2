// Every collective against a plain sequential model of it, over random
// groups, shapes and schedules. The models below are written from the
// contract (communicator.hpp), independently of the simulator.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <tuple>

#include "base/error.hpp"
#include "sim/fiber_simulation.hpp"
#include "sim/mesh.hpp"
#include "tests/rapidcheck_seed.hpp"
#include "tests/sim/sim_test_support.hpp"

namespace infonce::sim {
namespace {

using testing::gen_group;
using testing::gen_schedule;
using testing::same_bits;

// ---- Sequential models: inputs indexed by group rank. ----

template <class T>
std::vector<T> model_concat(const std::vector<std::vector<T>>& inputs) {
  std::vector<T> out;
  for (const auto& input : inputs) out.insert(out.end(), input.begin(), input.end());
  return out;
}

template <class T>
std::vector<T> model_reduce(const std::vector<std::vector<T>>& inputs, ReduceOp op) {
  std::vector<T> out = inputs[0];
  for (std::size_t i = 1; i < inputs.size(); ++i) {
    for (std::size_t j = 0; j < out.size(); ++j) out[j] = out[j] + inputs[i][j];
  }
  if (op == ReduceOp::mean) {
    for (T& v : out) v = v / static_cast<T>(inputs.size());
  }
  return out;
}

// Member r receives shard r of every member's vector, summed over the members
// in group-rank order, left to right.
template <class T>
std::vector<std::vector<T>> model_reduce_scatter(const std::vector<std::vector<T>>& inputs,
                                                 const std::vector<std::int64_t>& counts) {
  std::vector<std::vector<T>> out;
  std::size_t offset = 0;
  for (const std::int64_t count : counts) {
    std::vector<T> shard;
    for (std::size_t j = offset; j < offset + static_cast<std::size_t>(count); ++j) {
      T sum = inputs[0][j];
      for (std::size_t m = 1; m < inputs.size(); ++m) sum = sum + inputs[m][j];
      shard.push_back(sum);
    }
    out.push_back(shard);
    offset += static_cast<std::size_t>(count);
  }
  return out;
}

// ---- Random inputs ----

template <class T>
rc::Gen<T> gen_element();
template <>
rc::Gen<double> gen_element<double>() {
  return rc::gen::map(rc::gen::inRange(-1000000, 1000000), [](int v) { return v / 64.0; });
}
template <>
rc::Gen<float> gen_element<float>() {
  return rc::gen::map(rc::gen::inRange(-100000, 100000),
                      [](int v) { return static_cast<float>(v) / 3.0f; });
}
template <>
rc::Gen<std::int64_t> gen_element<std::int64_t>() {
  return rc::gen::arbitrary<std::int64_t>();
}

template <class T>
std::vector<std::vector<T>> gen_inputs(std::size_t members, std::size_t count) {
  std::vector<std::vector<T>> inputs(members);
  for (auto& input : inputs) input = *rc::gen::container<std::vector<T>>(count, gen_element<T>());
  return inputs;
}

// Values of very different magnitudes and signs: their floating-point sum
// depends on the order of the addends, so a wrong order shows in the bits.
template <class T>
rc::Gen<T> gen_order_sensitive() {
  return rc::gen::map(rc::gen::pair(rc::gen::inRange(-1000, 1000), rc::gen::inRange(-30, 31)),
                      [](const std::pair<int, int>& v) {
                        return static_cast<T>(std::ldexp(v.first / 3.0, v.second));
                      });
}

// Shard sizes for `members`, zero often (a rank with an empty shard).
inline rc::Gen<std::vector<std::int64_t>> gen_shard_counts(std::size_t members) {
  return rc::gen::container<std::vector<std::int64_t>>(
      members, rc::gen::weightedOneOf<std::int64_t>({{1, rc::gen::just<std::int64_t>(0)},
                                                     {3, rc::gen::inRange<std::int64_t>(0, 6)}}));
}

SimulationOptions options_for(std::int32_t world, const Schedule& schedule) {
  SimulationOptions options;
  options.world_size = world;
  options.schedule = schedule;
  return options;
}

// ---- Properties ----

template <class T>
void check_all_gather() {
  const auto world = *rc::gen::inRange(1, 13);
  const Group group = *gen_group(world);
  const auto count = static_cast<std::size_t>(*rc::gen::inRange(0, 6));
  const auto inputs = gen_inputs<T>(group.world_ranks.size(), count);
  std::vector<std::vector<T>> results(static_cast<std::size_t>(world));
  run_fibers(options_for(world, *gen_schedule()), [&](Communicator& comm) {
    const std::int32_t me = group.rank_of(comm.world_rank());
    if (me < 0) return;
    results[comm.world_rank()] = comm.all_gather(group, std::span<const T>(inputs[me]));
  });
  const std::vector<T> expected = model_concat(inputs);
  for (const std::int32_t w : group.world_ranks) {
    RC_ASSERT(same_bits<T>(results[w], expected));
  }
}

RC_GTEST_PROP(Collectives, AllGatherDoubleMatchesModel, ()) {
  check_all_gather<double>();
}
RC_GTEST_PROP(Collectives, AllGatherFloatMatchesModel, ()) {
  check_all_gather<float>();
}
RC_GTEST_PROP(Collectives, AllGatherInt64MatchesModel, ()) {
  check_all_gather<std::int64_t>();
}

template <class T>
void check_all_gather_v() {
  const auto world = *rc::gen::inRange(1, 13);
  const Group group = *gen_group(world);
  const auto counts = *rc::gen::container<std::vector<std::int64_t>>(
      group.world_ranks.size(), rc::gen::inRange<std::int64_t>(0, 6));
  std::vector<std::vector<T>> inputs;
  for (const std::int64_t c : counts) {
    inputs.push_back(
        *rc::gen::container<std::vector<T>>(static_cast<std::size_t>(c), gen_element<T>()));
  }
  std::vector<std::vector<T>> results(static_cast<std::size_t>(world));
  run_fibers(options_for(world, *gen_schedule()), [&](Communicator& comm) {
    const std::int32_t me = group.rank_of(comm.world_rank());
    if (me < 0) return;
    results[comm.world_rank()] = comm.all_gather_v(group, std::span<const T>(inputs[me]), counts);
  });
  const std::vector<T> expected = model_concat(inputs);
  for (const std::int32_t w : group.world_ranks) RC_ASSERT(same_bits<T>(results[w], expected));
}

RC_GTEST_PROP(Collectives, AllGatherVDoubleMatchesModel, ()) {
  check_all_gather_v<double>();
}
RC_GTEST_PROP(Collectives, AllGatherVFloatMatchesModel, ()) {
  check_all_gather_v<float>();
}
RC_GTEST_PROP(Collectives, AllGatherVInt64MatchesModel, ()) {
  check_all_gather_v<std::int64_t>();
}

RC_GTEST_PROP(Collectives, AllGatherObjectMatchesModel, ()) {
  const auto world = *rc::gen::inRange(1, 13);
  const Group group = *gen_group(world);
  std::vector<std::vector<std::byte>> objects;
  for (std::size_t i = 0; i < group.world_ranks.size(); ++i) {
    const auto bytes = *rc::gen::container<std::vector<std::uint8_t>>(
        static_cast<std::size_t>(*rc::gen::inRange(0, 40)), rc::gen::arbitrary<std::uint8_t>());
    objects.emplace_back(reinterpret_cast<const std::byte*>(bytes.data()),
                         reinterpret_cast<const std::byte*>(bytes.data()) + bytes.size());
  }
  std::vector<std::vector<std::vector<std::byte>>> results(static_cast<std::size_t>(world));
  run_fibers(options_for(world, *gen_schedule()), [&](Communicator& comm) {
    const std::int32_t me = group.rank_of(comm.world_rank());
    if (me < 0) return;
    for (const auto object : comm.all_gather_object(group, objects[me])) {
      results[comm.world_rank()].emplace_back(object.begin(), object.end());
    }
  });
  for (const std::int32_t w : group.world_ranks) RC_ASSERT(results[w] == objects);
}

// Every member's result views the one buffer the collective built: the
// objects are not copied per member (the O(P^2) cost of copying them).
TEST(Collectives, AllGatherObjectMembersShareOneResult) {
  SimulationOptions options;
  options.world_size = 4;
  std::vector<GatheredObjects> results(4);
  run_fibers(options, [&](Communicator& comm) {
    const std::vector<std::byte> mine(static_cast<std::size_t>(comm.world_rank()) + 1,
                                      std::byte(comm.world_rank()));
    results[comm.world_rank()] = comm.all_gather_object(comm.world(), mine);
  });
  for (const GatheredObjects& result : results) {
    ASSERT_EQ(result.size(), 4u);
    EXPECT_EQ(result.bytes().data(), results[0].bytes().data());
    for (std::size_t i = 0; i < 4; ++i) {
      EXPECT_EQ(result[i].data(), results[0][i].data());
      EXPECT_EQ(std::vector<std::byte>(result[i].begin(), result[i].end()),
                std::vector<std::byte>(i + 1, std::byte(i)));
    }
  }
}

template <class T>
void check_reduce_scatter_v() {
  const auto world = *rc::gen::inRange(1, 13);
  const Group group = *gen_group(world);
  const auto counts = *gen_shard_counts(group.world_ranks.size());
  const auto total = static_cast<std::size_t>(std::accumulate(counts.begin(), counts.end(), 0L));
  std::vector<std::vector<T>> inputs(group.world_ranks.size());
  for (auto& input : inputs)
    input = *rc::gen::container<std::vector<T>>(total, gen_order_sensitive<T>());
  std::vector<std::vector<T>> results(static_cast<std::size_t>(world));
  run_fibers(options_for(world, *gen_schedule()), [&](Communicator& comm) {
    const std::int32_t me = group.rank_of(comm.world_rank());
    if (me < 0) return;
    results[comm.world_rank()] =
        comm.reduce_scatter_v(group, std::span<const T>(inputs[me]), counts);
  });
  const auto expected = model_reduce_scatter(inputs, counts);
  for (std::size_t r = 0; r < group.world_ranks.size(); ++r) {
    RC_ASSERT(same_bits<T>(results[group.world_ranks[r]], expected[r]));
  }
}

RC_GTEST_PROP(Collectives, ReduceScatterVDoubleMatchesModel, ()) {
  check_reduce_scatter_v<double>();
}
RC_GTEST_PROP(Collectives, ReduceScatterVFloatMatchesModel, ()) {
  check_reduce_scatter_v<float>();
}

// Every DP group of a mesh reduce-scatters its own data at the same time.
RC_GTEST_PROP(Collectives, ReduceScatterVOnEveryDpGroupAtOnce, ()) {
  const auto dp = *rc::gen::inRange(1, 6);
  const auto replicas = *rc::gen::inRange(1, 4);
  const MeshLayout mesh(dp * replicas, dp);
  std::vector<std::vector<std::int64_t>> counts;         // by replica index
  std::vector<std::vector<std::vector<double>>> inputs;  // by replica, then DP rank
  for (std::int32_t r = 0; r < replicas; ++r) {
    counts.push_back(*gen_shard_counts(static_cast<std::size_t>(dp)));
    const auto total =
        static_cast<std::size_t>(std::accumulate(counts[r].begin(), counts[r].end(), 0L));
    auto& group_inputs = inputs.emplace_back();
    for (std::int32_t d = 0; d < dp; ++d) {
      group_inputs.push_back(
          *rc::gen::container<std::vector<double>>(total, gen_order_sensitive<double>()));
    }
  }
  std::vector<std::vector<double>> results(static_cast<std::size_t>(mesh.world()));
  run_fibers(options_for(mesh.world(), *gen_schedule()), [&](Communicator& comm) {
    const std::int32_t w = comm.world_rank();
    const auto r = static_cast<std::size_t>(mesh.replica(w));
    const auto d = static_cast<std::size_t>(mesh.dp_rank(w));
    results[w] =
        comm.reduce_scatter_v(mesh.dp_group(w), std::span<const double>(inputs[r][d]), counts[r]);
  });
  for (std::int32_t w = 0; w < mesh.world(); ++w) {
    const auto r = static_cast<std::size_t>(mesh.replica(w));
    const auto expected = model_reduce_scatter(inputs[r], counts[r]);
    RC_ASSERT(same_bits<double>(results[w], expected[static_cast<std::size_t>(mesh.dp_rank(w))]));
  }
}

// The adjoint of all_gather_v: for any x (member i's shard x_i) and g (each
// member's full-length vector), sum over members of <g_m, all_gather_v(x)>
// equals sum over i of <reduce_scatter_v(g)_i, x_i>. Small integers keep
// every product and sum exact.
RC_GTEST_PROP(Collectives, ReduceScatterVIsTheAdjointOfAllGatherV, ()) {
  const auto world = *rc::gen::inRange(1, 9);
  const Group group = *gen_group(world);
  const std::size_t members = group.world_ranks.size();
  const auto counts = *gen_shard_counts(members);
  const auto total = static_cast<std::size_t>(std::accumulate(counts.begin(), counts.end(), 0L));
  const auto small = rc::gen::map(rc::gen::inRange(-50, 51), [](int v) { return double(v); });
  std::vector<std::vector<double>> shards, grads;
  for (std::size_t i = 0; i < members; ++i) {
    shards.push_back(
        *rc::gen::container<std::vector<double>>(static_cast<std::size_t>(counts[i]), small));
    grads.push_back(*rc::gen::container<std::vector<double>>(total, small));
  }
  double forward = 0, backward = 0;  // fibers share one thread: no race
  run_fibers(options_for(world, *gen_schedule()), [&](Communicator& comm) {
    const std::int32_t me = group.rank_of(comm.world_rank());
    if (me < 0) return;
    const auto gathered = comm.all_gather_v(group, std::span<const double>(shards[me]), counts);
    forward += std::inner_product(gathered.begin(), gathered.end(), grads[me].begin(), 0.0);
    const auto mine = comm.reduce_scatter_v(group, std::span<const double>(grads[me]), counts);
    backward += std::inner_product(mine.begin(), mine.end(), shards[me].begin(), 0.0);
  });
  RC_ASSERT(forward == backward);
}

// Shards in group-rank order, summed in group-rank order: with addends whose
// sum depends on the order, the documented order gives known results.
TEST(Collectives, ReduceScatterVSumsEachShardInGroupRankOrder) {
  SimulationOptions options;
  options.world_size = 3;
  // Group order {2, 0, 1}; counts {2, 0, 1}: group rank 0 (world 2) gets
  // elements 0..1, group rank 1 (world 0) nothing, group rank 2 (world 1) element 2.
  const Group group{4, {2, 0, 1}};
  const std::vector<std::int64_t> counts{2, 0, 1};
  const std::vector<std::vector<double>> by_world{
      {1.0, -1e16, 1e16}, {-1e16, 1.0, 1.0}, {1e16, 1e16, -1e16}};
  std::vector<std::vector<double>> results(3);
  for (const auto kind : {ScheduleKind::fifo, ScheduleKind::random}) {
    options.schedule = {kind, 3};
    run_fibers(options, [&](Communicator& comm) {
      const std::int32_t w = comm.world_rank();
      results[w] = comm.reduce_scatter_v(group, std::span<const double>(by_world[w]), counts);
    });
    // Element 0, order world 2, 0, 1: (1e16 + 1) + -1e16 = 0 (1e16 + 1 rounds to 1e16).
    // Element 1: (1e16 + -1e16) + 1 = 1. Element 2: (-1e16 + 1e16) + 1 = 1.
    EXPECT_EQ(results[2], (std::vector<double>{0.0, 1.0}));
    EXPECT_TRUE(results[0].empty());
    EXPECT_EQ(results[1], (std::vector<double>{1.0}));
  }
}

// Under reduction_order_seed the order permutes per collective, as all_reduce's
// does: reproducibly and independently of the schedule.
TEST(Collectives, ReduceScatterVFollowsTheReductionOrderSeed) {
  const std::vector<double> values{1e16, 1.0, -1e16, 1.0, 1.0, -1.0, 3.0, 1e-3};
  std::set<double> sums_over_seeds;
  for (std::uint64_t seed = 0; seed < 16; ++seed) {
    std::set<double> sums_over_schedules;
    for (const Schedule schedule :
         {Schedule{ScheduleKind::fifo, 0}, Schedule{ScheduleKind::random, 5}}) {
      SimulationOptions options;
      options.world_size = 8;
      options.schedule = schedule;
      options.reduction_order_seed = seed;
      std::vector<double> results(8);
      run_fibers(options, [&](Communicator& comm) {
        // Every member contributes one value to each of the 8 one-element shards.
        const std::vector<double> mine(8, values[comm.world_rank()]);
        const std::vector<std::int64_t> counts(8, 1);
        results[comm.world_rank()] =
            comm.reduce_scatter_v(comm.world(), std::span<const double>(mine), counts)[0];
      });
      for (const double r : results) EXPECT_EQ(r, results[0]);
      sums_over_schedules.insert(results[0]);
    }
    EXPECT_EQ(sums_over_schedules.size(), 1u) << "seed " << seed;
    sums_over_seeds.insert(*sums_over_schedules.begin());
  }
  EXPECT_GE(sums_over_seeds.size(), 2u);
}

template <class T>
void check_all_reduce(ReduceOp op) {
  const auto world = *rc::gen::inRange(1, 13);
  const Group group = *gen_group(world);
  const auto count = static_cast<std::size_t>(*rc::gen::inRange(0, 6));
  const auto inputs = gen_inputs<T>(group.world_ranks.size(), count);
  std::vector<std::vector<T>> results(static_cast<std::size_t>(world));
  run_fibers(options_for(world, *gen_schedule()), [&](Communicator& comm) {
    const std::int32_t me = group.rank_of(comm.world_rank());
    if (me < 0) return;
    std::vector<T> values = inputs[me];
    comm.all_reduce(group, std::span<T>(values), op);
    results[comm.world_rank()] = values;
  });
  const std::vector<T> expected = model_reduce(inputs, op);
  for (const std::int32_t w : group.world_ranks) RC_ASSERT(same_bits<T>(results[w], expected));
}

RC_GTEST_PROP(Collectives, AllReduceSumDoubleMatchesModel, ()) {
  check_all_reduce<double>(ReduceOp::sum);
}
RC_GTEST_PROP(Collectives, AllReduceMeanDoubleMatchesModel, ()) {
  check_all_reduce<double>(ReduceOp::mean);
}
RC_GTEST_PROP(Collectives, AllReduceSumFloatMatchesModel, ()) {
  check_all_reduce<float>(ReduceOp::sum);
}
RC_GTEST_PROP(Collectives, AllReduceMeanFloatMatchesModel, ()) {
  check_all_reduce<float>(ReduceOp::mean);
}

RC_GTEST_PROP(Collectives, BroadcastMatchesModel, ()) {
  const auto world = *rc::gen::inRange(1, 13);
  const Group group = *gen_group(world);
  const auto count = static_cast<std::size_t>(*rc::gen::inRange(0, 6));
  const auto root = *rc::gen::inRange<std::int32_t>(0, group.size());
  const auto inputs = gen_inputs<double>(group.world_ranks.size(), count);
  std::vector<std::vector<double>> results(static_cast<std::size_t>(world));
  std::vector<std::vector<std::byte>> byte_results(static_cast<std::size_t>(world));
  run_fibers(options_for(world, *gen_schedule()), [&](Communicator& comm) {
    const std::int32_t me = group.rank_of(comm.world_rank());
    if (me < 0) return;
    std::vector<double> values = inputs[me];
    comm.broadcast(group, std::span<double>(values), root);
    results[comm.world_rank()] = values;
    std::vector<std::byte> bytes(count, std::byte(me));
    comm.broadcast(group, std::span<std::byte>(bytes), root);
    byte_results[comm.world_rank()] = bytes;
  });
  for (const std::int32_t w : group.world_ranks) {
    RC_ASSERT(same_bits<double>(results[w], inputs[root]));
    RC_ASSERT(byte_results[w] == std::vector<std::byte>(count, std::byte(root)));
  }
}

RC_GTEST_PROP(Collectives, SplitMatchesModel, ()) {
  const auto world = *rc::gen::inRange(1, 13);
  const auto colors = *rc::gen::container<std::vector<std::int32_t>>(
      static_cast<std::size_t>(world), rc::gen::inRange(-1, 4));
  const auto keys = *rc::gen::container<std::vector<std::int32_t>>(static_cast<std::size_t>(world),
                                                                   rc::gen::inRange(-3, 3));
  std::vector<Group> results(static_cast<std::size_t>(world));
  run_fibers(options_for(world, *gen_schedule()), [&](Communicator& comm) {
    const auto w = static_cast<std::size_t>(comm.world_rank());
    results[w] = comm.split(colors[w], keys[w]);
  });
  // Model: colors ascending get ids 1, 2, ...; members sorted by (key, world rank).
  std::map<std::int32_t, std::vector<std::pair<std::int32_t, std::int32_t>>> by_color;
  for (std::int32_t w = 0; w < world; ++w) {
    if (colors[w] >= 0) by_color[colors[w]].emplace_back(keys[w], w);
  }
  std::map<std::int32_t, Group> expected;
  std::int32_t id = 1;
  for (auto& [color, members] : by_color) {
    std::ranges::sort(members);
    Group group{id++, {}};
    for (const auto& member : members) group.world_ranks.push_back(member.second);
    expected[color] = group;
  }
  for (std::int32_t w = 0; w < world; ++w) {
    const Group& got = results[w];
    if (colors[w] < 0) {
      RC_ASSERT(got.id == -1);
      RC_ASSERT(got.world_ranks.empty());
    } else {
      RC_ASSERT(got.id == expected[colors[w]].id);
      RC_ASSERT(got.world_ranks == expected[colors[w]].world_ranks);
    }
  }
}

// No member leaves a barrier before every member has entered it.
RC_GTEST_PROP(Collectives, BarrierSeparatesBeforeAndAfter, ()) {
  const auto world = *rc::gen::inRange(1, 13);
  const Group group = *gen_group(world);
  std::vector<std::pair<char, std::int32_t>> log;  // single-threaded: fibers share it safely
  run_fibers(options_for(world, *gen_schedule()), [&](Communicator& comm) {
    if (group.rank_of(comm.world_rank()) < 0) return;
    log.emplace_back('>', comm.world_rank());
    comm.barrier(group);
    log.emplace_back('<', comm.world_rank());
  });
  RC_ASSERT(log.size() == 2 * group.world_ranks.size());
  for (std::size_t i = 0; i < group.world_ranks.size(); ++i) RC_ASSERT(log[i].first == '>');
}

// Collectives on disjoint groups proceed independently and concurrently.
TEST(Collectives, DisjointGroupsRunDifferentCollectivesAtOnce) {
  SimulationOptions options;
  options.world_size = 6;
  std::vector<std::vector<double>> results(6);
  for (const auto kind : {ScheduleKind::fifo, ScheduleKind::random}) {
    options.schedule = {kind, 11};
    run_fibers(options, [&](Communicator& comm) {
      const std::int32_t w = comm.world_rank();
      const Group evens{7, {0, 2, 4}};
      const Group odds{8, {5, 3, 1}};
      std::vector<double> mine{static_cast<double>(w)};
      if (w % 2 == 0) {
        results[w] = comm.all_gather(evens, std::span<const double>(mine));
      } else {
        comm.all_reduce(odds, std::span<double>(mine), ReduceOp::sum);
        results[w] = mine;
      }
    });
    EXPECT_EQ(results[0], (std::vector<double>{0, 2, 4}));
    EXPECT_EQ(results[4], (std::vector<double>{0, 2, 4}));
    EXPECT_EQ(results[1], (std::vector<double>{9}));
    EXPECT_EQ(results[5], (std::vector<double>{9}));
  }
}

// all_reduce sums in group-rank order, left to right: with values where
// addition is not associative, the documented order gives a known result.
TEST(Collectives, AllReduceSumsInGroupRankOrder) {
  SimulationOptions options;
  options.world_size = 4;
  const std::vector<double> values{1e16, 1.0, -1e16, 1.0};
  // ((1e16 + 1) + -1e16) + 1 = (1e16 + -1e16) + 1 = 1 (1e16 + 1 rounds to 1e16).
  for (std::uint64_t seed = 0; seed < 5; ++seed) {
    options.schedule = {ScheduleKind::random, seed};
    std::vector<double> results(4);
    run_fibers(options, [&](Communicator& comm) {
      double v = values[comm.world_rank()];
      comm.all_reduce(comm.world(), std::span<double>(&v, 1), ReduceOp::sum);
      results[comm.world_rank()] = v;
    });
    EXPECT_EQ(results, (std::vector<double>(4, 1.0)));
  }
  // The same values in group order {1, 2, 3, 0}: ((1 + -1e16) + 1) + 1e16 = 0? -1e16 + 1 rounds
  // to -1e16, + 1 again to -1e16, + 1e16 = 0.
  std::vector<double> results(4);
  run_fibers(options, [&](Communicator& comm) {
    double v = values[comm.world_rank()];
    comm.all_reduce(Group{3, {1, 2, 3, 0}}, std::span<double>(&v, 1), ReduceOp::sum);
    results[comm.world_rank()] = v;
  });
  EXPECT_EQ(results, (std::vector<double>(4, 0.0)));
}

TEST(Collectives, MeanIsSumDividedByMemberCount) {
  SimulationOptions options;
  options.world_size = 3;
  std::vector<float> results(3);
  run_fibers(options, [&](Communicator& comm) {
    float v = 0.1f * static_cast<float>(comm.world_rank() + 1);
    comm.all_reduce(comm.world(), std::span<float>(&v, 1), ReduceOp::mean);
    results[comm.world_rank()] = v;
  });
  const float expected = ((0.1f * 1 + 0.1f * 2) + 0.1f * 3) / 3.0f;
  for (const float r : results) EXPECT_EQ(r, expected);
}

// A seeded summation order permutes per collective, reproducibly, and
// independently of the schedule.
TEST(Collectives, ReductionOrderSeedPermutesSummationReproducibly) {
  const std::vector<double> values{1e16, 1.0, -1e16, 1.0, 1.0, -1.0, 3.0, 1e-3};
  std::set<double> sums_over_seeds;
  for (std::uint64_t seed = 0; seed < 16; ++seed) {
    std::set<double> sums_over_schedules;
    for (const Schedule schedule :
         {Schedule{ScheduleKind::fifo, 0}, Schedule{ScheduleKind::random, 5},
          Schedule{ScheduleKind::random, 6}}) {
      SimulationOptions options;
      options.world_size = 8;
      options.schedule = schedule;
      options.reduction_order_seed = seed;
      std::vector<double> results(8);
      run_fibers(options, [&](Communicator& comm) {
        double v = values[comm.world_rank()];
        comm.all_reduce(comm.world(), std::span<double>(&v, 1), ReduceOp::sum);
        results[comm.world_rank()] = v;
      });
      for (const double r : results) EXPECT_EQ(r, results[0]);
      sums_over_schedules.insert(results[0]);
    }
    EXPECT_EQ(sums_over_schedules.size(), 1u) << "seed " << seed;
    sums_over_seeds.insert(*sums_over_schedules.begin());
  }
  EXPECT_GE(sums_over_seeds.size(), 2u);
}

TEST(Collectives, WorldGroupAndRanks) {
  SimulationOptions options;
  options.world_size = 5;
  std::vector<Group> worlds(5);
  std::vector<std::int32_t> sizes(5);
  run_fibers(options, [&](Communicator& comm) {
    worlds[comm.world_rank()] = comm.world();
    sizes[comm.world_rank()] = comm.world_size();
  });
  for (std::int32_t w = 0; w < 5; ++w) {
    EXPECT_EQ(worlds[w].id, 0);
    EXPECT_EQ(worlds[w].world_ranks, (std::vector<std::int32_t>{0, 1, 2, 3, 4}));
    EXPECT_EQ(sizes[w], 5);
  }
}

TEST(Collectives, GroupRankOf) {
  const Group group{4, {5, 2, 9}};
  EXPECT_EQ(group.rank_of(5), 0);
  EXPECT_EQ(group.rank_of(9), 2);
  EXPECT_EQ(group.rank_of(3), -1);
}

TEST(Collectives, InvalidOptionsAreInputErrors) {
  const auto noop = [](Communicator&) {};
  SimulationOptions options;
  options.world_size = 0;
  EXPECT_THROW(run_fibers(options, noop), InputError);
  options.world_size = 2;
  options.fiber_stack_bytes = 1024;
  EXPECT_THROW(run_fibers(options, noop), InputError);
  options.fiber_stack_bytes = 64 * 1024;
  options.fault = {5, 0, FaultInjection::Kind::throw_error};
  EXPECT_THROW(run_fibers(options, noop), InputError);
}

}  // namespace
}  // namespace infonce::sim
