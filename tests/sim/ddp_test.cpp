// DDP gradient buffers: local accumulation with no communication, then one
// reduction, compared with a sequential model of what DDP computes.
#include <gtest/gtest.h>

#include <vector>

#include "sim/ddp.hpp"
#include "sim/fiber_simulation.hpp"
#include "sim/mesh.hpp"

namespace infonce::sim {
namespace {

// Forwards to a real communicator and counts the collectives called.
class CountingCommunicator final : public Communicator {
 public:
  explicit CountingCommunicator(Communicator& inner) : inner_(inner) {}
  int calls = 0;
  int all_reduces = 0;
  std::vector<std::int32_t> last_group;

  std::int32_t world_rank() const override { return inner_.world_rank(); }
  std::int32_t world_size() const override { return inner_.world_size(); }
  Group world() const override { return inner_.world(); }
  Group split(std::int32_t color, std::int32_t key) override {
    ++calls;
    return inner_.split(color, key);
  }
  std::vector<double> all_gather(const Group& g, std::span<const double> m) override {
    ++calls;
    return inner_.all_gather(g, m);
  }
  std::vector<float> all_gather(const Group& g, std::span<const float> m) override {
    ++calls;
    return inner_.all_gather(g, m);
  }
  std::vector<std::int64_t> all_gather(const Group& g, std::span<const std::int64_t> m) override {
    ++calls;
    return inner_.all_gather(g, m);
  }
  std::vector<double> all_gather_v(const Group& g, std::span<const double> m,
                                   std::span<const std::int64_t> c) override {
    ++calls;
    return inner_.all_gather_v(g, m, c);
  }
  std::vector<float> all_gather_v(const Group& g, std::span<const float> m,
                                  std::span<const std::int64_t> c) override {
    ++calls;
    return inner_.all_gather_v(g, m, c);
  }
  std::vector<std::int64_t> all_gather_v(const Group& g, std::span<const std::int64_t> m,
                                         std::span<const std::int64_t> c) override {
    ++calls;
    return inner_.all_gather_v(g, m, c);
  }
  GatheredObjects all_gather_object(const Group& g, std::span<const std::byte> m) override {
    ++calls;
    return inner_.all_gather_object(g, m);
  }
  std::vector<double> reduce_scatter_v(const Group& g, std::span<const double> v,
                                       std::span<const std::int64_t> c) override {
    ++calls;
    return inner_.reduce_scatter_v(g, v, c);
  }
  std::vector<float> reduce_scatter_v(const Group& g, std::span<const float> v,
                                      std::span<const std::int64_t> c) override {
    ++calls;
    return inner_.reduce_scatter_v(g, v, c);
  }
  void all_reduce(const Group& g, std::span<double> v, ReduceOp op) override {
    ++calls;
    ++all_reduces;
    last_group = g.world_ranks;
    inner_.all_reduce(g, v, op);
  }
  void all_reduce(const Group& g, std::span<float> v, ReduceOp op) override {
    ++calls;
    ++all_reduces;
    last_group = g.world_ranks;
    inner_.all_reduce(g, v, op);
  }
  void broadcast(const Group& g, std::span<double> v, std::int32_t root) override {
    ++calls;
    inner_.broadcast(g, v, root);
  }
  void broadcast(const Group& g, std::span<std::byte> v, std::int32_t root) override {
    ++calls;
    inner_.broadcast(g, v, root);
  }
  void barrier(const Group& g) override {
    ++calls;
    inner_.barrier(g);
  }
  void send(const Group& g, std::int32_t peer, std::span<const double> v) override {
    ++calls;
    inner_.send(g, peer, v);
  }
  void send(const Group& g, std::int32_t peer, std::span<const float> v) override {
    ++calls;
    inner_.send(g, peer, v);
  }
  void recv(const Group& g, std::int32_t peer, std::span<double> out) override {
    ++calls;
    inner_.recv(g, peer, out);
  }
  void recv(const Group& g, std::int32_t peer, std::span<float> out) override {
    ++calls;
    inner_.recv(g, peer, out);
  }

 private:
  Communicator& inner_;
};

constexpr std::int32_t kWorld = 6;
constexpr std::int32_t kDp = 3;
constexpr int kMicroSteps = 3;
constexpr std::size_t kSize = 4;

// Rank w's gradient in micro-step m: values whose sums round.
template <class S>
std::vector<S> gradient(std::int32_t w, int m) {
  std::vector<S> g(kSize);
  for (std::size_t j = 0; j < kSize; ++j) {
    g[j] = static_cast<S>(0.1) * static_cast<S>(w + 1) + static_cast<S>(m) / static_cast<S>(3) +
           static_cast<S>(j) * static_cast<S>(1e-7);
  }
  return g;
}

// Model: each rank's local sum over micro-steps in order.
template <class S>
std::vector<S> local_sum(std::int32_t w) {
  std::vector<S> total(kSize, S{0});
  for (int m = 0; m < kMicroSteps; ++m) {
    const auto g = gradient<S>(w, m);
    for (std::size_t j = 0; j < kSize; ++j) total[j] = total[j] + g[j];
  }
  return total;
}

// Model: sum the given ranks' local sums in the given order, left to right.
template <class S>
std::vector<S> sum_over(const std::vector<std::int32_t>& ranks) {
  std::vector<S> total = local_sum<S>(ranks[0]);
  for (std::size_t i = 1; i < ranks.size(); ++i) {
    const auto next = local_sum<S>(ranks[i]);
    for (std::size_t j = 0; j < kSize; ++j) total[j] = total[j] + next[j];
  }
  return total;
}

template <class S>
void check(GradientReduction mode) {
  std::vector<std::vector<S>> results(kWorld);
  std::vector<int> calls_before_reduce(kWorld, -1);
  std::vector<int> calls_after_reduce(kWorld, -1);
  std::vector<std::vector<std::int32_t>> reduce_groups(kWorld);
  for (const auto kind : {ScheduleKind::fifo, ScheduleKind::random}) {
    SimulationOptions options;
    options.world_size = kWorld;
    options.schedule = {kind, 9};
    run_fibers(options, [&](Communicator& real) {
      CountingCommunicator comm(real);
      const std::int32_t w = comm.world_rank();
      GradientBuffer<S> buffer(kSize);
      for (int m = 0; m < kMicroSteps; ++m) {
        const auto g = gradient<S>(w, m);
        buffer.accumulate(g);
      }
      calls_before_reduce[w] = comm.calls;
      buffer.reduce(comm, MeshLayout(kWorld, kDp).dp_group(w), mode);
      calls_after_reduce[w] = comm.calls;
      reduce_groups[w] = comm.last_group;
      results[w].assign(buffer.values().begin(), buffer.values().end());
    });
    const MeshLayout mesh(kWorld, kDp);
    for (std::int32_t w = 0; w < kWorld; ++w) {
      EXPECT_EQ(calls_before_reduce[w], 0) << "accumulation must not communicate";
      EXPECT_EQ(calls_after_reduce[w], 1) << "one collective for the reduction";
      std::vector<S> expected;
      if (mode == GradientReduction::mean_over_world) {
        EXPECT_EQ(reduce_groups[w], mesh.world_group().world_ranks);
        expected = sum_over<S>(mesh.world_group().world_ranks);
        for (S& v : expected) v = v / static_cast<S>(kWorld);
      } else {
        EXPECT_EQ(reduce_groups[w], mesh.dp_group(w).world_ranks);
        expected = sum_over<S>(mesh.dp_group(w).world_ranks);
      }
      EXPECT_EQ(results[w], expected) << "world rank " << w;
    }
  }
}

TEST(Ddp, MeanOverWorldIsTheWorldSumDividedByW) {
  check<double>(GradientReduction::mean_over_world);
}
TEST(Ddp, MeanOverWorldFloat) {
  check<float>(GradientReduction::mean_over_world);
}
TEST(Ddp, SumOverGroupIsTheDpGroupSum) {
  check<double>(GradientReduction::sum_over_group);
}
TEST(Ddp, SumOverGroupFloat) {
  check<float>(GradientReduction::sum_over_group);
}

// Replicas of one DP shard hold the same data; with sum_over_group each DP
// group sums its own ranks, so the two replica groups end with different sums.
TEST(Ddp, SumOverGroupDoesNotMixReplicaGroups) {
  std::vector<double> first(kWorld);
  SimulationOptions options;
  options.world_size = kWorld;
  run_fibers(options, [&first](Communicator& comm) {
    GradientBuffer<double> buffer(1);
    const double g = comm.world_rank();
    buffer.accumulate(std::span<const double>(&g, 1));
    buffer.reduce(comm, MeshLayout(kWorld, kDp).dp_group(comm.world_rank()),
                  GradientReduction::sum_over_group);
    first[comm.world_rank()] = buffer.values()[0];
  });
  // DP group {0,2,4} sums to 6, {1,3,5} to 9.
  EXPECT_EQ(first, (std::vector<double>{6, 9, 6, 9, 6, 9}));
}

}  // namespace
}  // namespace infonce::sim
