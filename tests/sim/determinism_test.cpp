// The determinism self-check: it passes deterministic programs and reports
// the first divergence of programs that are not.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string_view>

#include "base/rng.hpp"
#include "sim/determinism.hpp"
#include "sim/mesh.hpp"
#include "tests/sim/sim_test_support.hpp"

namespace infonce::sim {
namespace {

using ::testing::HasSubstr;
using testing::record;
using testing::record_value;
using ::testing::StartsWith;

std::uint64_t fnv_of(std::string_view text) {
  return fnv1a64(std::as_bytes(std::span(text.data(), text.size())));
}

// Published FNV-1a 64-bit test vectors.
TEST(Determinism, FnvMatchesReferenceVectors) {
  EXPECT_EQ(fnv_of(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(fnv_of("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(fnv_of("foobar"), 0x85944171f73967e8ULL);
}

TEST(Determinism, FnvOfAWordHashesItsBytesLeastSignificantFirst) {
  const std::string_view bytes("\x01\x02\x03\x04\x05\x06\x07\x08", 8);
  EXPECT_EQ(fnv1a64_u64(0x0807060504030201ULL), fnv_of(bytes));
}

TEST(Determinism, RecordHashSeesEveryByteAndTheError) {
  RunRecord a;
  a.outputs = {{std::byte{1}, std::byte{2}}, {}};
  RunRecord b = a;
  EXPECT_EQ(a.hash(), b.hash());
  b.outputs[0][1] = std::byte{3};
  EXPECT_NE(a.hash(), b.hash());
  RunRecord c = a;
  c.outputs = {{std::byte{1}}, {std::byte{2}}};  // same bytes, other split
  EXPECT_NE(a.hash(), c.hash());
  RunRecord d = a;
  d.error = "x";
  EXPECT_NE(a.hash(), d.hash());
}

// A mixed program over DP groups and the world, with a seeded reduction order.
std::vector<std::byte> mixed_program(Communicator& comm) {
  const MeshLayout mesh(8, 4);
  const Group dp = mesh.dp_group(comm.world_rank());
  Rng rng(derive_seed(5, static_cast<std::uint64_t>(comm.world_rank())));
  std::vector<std::byte> out;
  for (int step = 0; step < 5; ++step) {
    std::vector<double> mine(3);
    for (double& v : mine) v = rng.unit() * 1e6 - 5e5;
    const auto gathered = comm.all_gather(dp, std::span<const double>(mine));
    record<double>(out, gathered);
    comm.all_reduce(comm.world(), std::span<double>(mine), ReduceOp::mean);
    record<double>(out, mine);
    const Group sub = comm.split(static_cast<std::int32_t>(rng.below(3)), 0);
    record_value(out, sub.id);
    record<std::int32_t>(out, sub.world_ranks);
  }
  return out;
}

TEST(Determinism, MixedProgramIsDeterministic) {
  SimulationOptions options;
  options.world_size = 8;
  options.reduction_order_seed = 77;
  const auto schedules = default_schedules();
  const DeterminismReport report = check_determinism(options, mixed_program, schedules);
  EXPECT_TRUE(report.deterministic) << report.first_divergence;
  EXPECT_EQ(report.runs.size(), 2 * schedules.size());
  EXPECT_EQ(report.runs[0], "fifo#0");
  EXPECT_EQ(report.runs[3], "random(1)#1");
  for (const std::uint64_t hash : report.hashes) EXPECT_EQ(hash, report.hashes[0]);
  EXPECT_TRUE(report.first_divergence.empty());
}

// Reading shared state outside the collectives makes results depend on the
// interleaving: the check must say where.
TEST(Determinism, ScheduleDependentProgramIsCaught) {
  SimulationOptions options;
  options.world_size = 4;
  int arrivals = 0;
  const RecordingProgram program = [&arrivals](Communicator& comm) {
    std::vector<std::byte> out;
    comm.barrier(comm.world());
    record_value(out, arrivals++ % 4);  // arrival order: depends on the schedule
    return out;
  };
  const DeterminismReport report = check_determinism(options, program, default_schedules());
  EXPECT_FALSE(report.deterministic);
  EXPECT_THAT(report.first_divergence, StartsWith("random("));
  EXPECT_THAT(report.first_divergence, HasSubstr("differs from fifo#0: world rank "));
  EXPECT_THAT(report.first_divergence, HasSubstr("output byte 0 is 0x0"));
}

// A program that changes between runs is caught even under one schedule.
TEST(Determinism, RunDependentProgramIsCaughtOnTheSecondRun) {
  SimulationOptions options;
  options.world_size = 3;
  int runs = 0;
  const RecordingProgram program = [&runs](Communicator& comm) {
    std::vector<std::byte> out;
    if (comm.world_rank() == 0) ++runs;
    comm.barrier(comm.world());
    record_value(out, static_cast<std::int64_t>(runs));
    return out;
  };
  const std::vector<Schedule> fifo{{ScheduleKind::fifo, 0}};
  const DeterminismReport report = check_determinism(options, program, fifo);
  EXPECT_FALSE(report.deterministic);
  EXPECT_EQ(report.first_divergence,
            "fifo#1 differs from fifo#0: world rank 0 output byte 0 is 0x02 vs 0x01");
}

TEST(Determinism, FailuresArePartOfTheRecord) {
  SimulationOptions options;
  options.world_size = 8;
  for (const auto kind : {FaultInjection::Kind::wrong_group, FaultInjection::Kind::early_return,
                          FaultInjection::Kind::wrong_size}) {
    options.fault = {1, 4, kind};  // call #4: the second step's all_reduce
    const RunRecord record = run_recorded(options, mixed_program);
    ASSERT_TRUE(record.error.has_value());
    EXPECT_TRUE(record.outputs.empty());
    const DeterminismReport report = check_determinism(options, mixed_program, default_schedules());
    EXPECT_TRUE(report.deterministic) << report.first_divergence;
  }
}

TEST(Determinism, DifferingErrorsAreReported) {
  SimulationOptions options;
  options.world_size = 2;
  int runs = 0;
  const RecordingProgram program = [&runs](Communicator& comm) -> std::vector<std::byte> {
    if (comm.world_rank() == 1) throw std::runtime_error("run " + std::to_string(runs++));
    return {};
  };
  const std::vector<Schedule> fifo{{ScheduleKind::fifo, 0}};
  const DeterminismReport report = check_determinism(options, program, fifo);
  EXPECT_EQ(report.first_divergence,
            "fifo#1 differs from fifo#0: error \"world rank 1 threw std::runtime_error: run 1 "
            "before any collective call\" vs \"world rank 1 threw std::runtime_error: run 0 "
            "before any collective call\"");
}

}  // namespace
}  // namespace infonce::sim
