// Every fault becomes a SimulationError naming the collective's sequence
// number, kind, group and ranks, well under a second, with every fiber
// unwound; and the simulator works again afterwards.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "sim/fiber_simulation.hpp"
#include "sim/mesh.hpp"
#include "sim/stack_pool.hpp"

namespace infonce::sim {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using Kind = FaultInjection::Kind;

// Live objects created by rank programs: every fiber must unwind them.
int live_guards = 0;
struct Guard {
  Guard() { ++live_guards; }
  ~Guard() { --live_guards; }
  Guard(const Guard&) = delete;
  Guard& operator=(const Guard&) = delete;
};

// The SimulationError's message; fails the test if there is none, if it took
// a second or more, or if anything was left behind.
std::string failure_of(const SimulationOptions& options, const RankProgram& program) {
  const auto start = std::chrono::steady_clock::now();
  std::string message;
  try {
    run_fibers(options, program);
    ADD_FAILURE() << "no SimulationError";
  } catch (const SimulationError& e) {
    message = e.what();
  }
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_LT(elapsed, std::chrono::seconds(1));
  EXPECT_EQ(live_guards, 0) << "a rank's objects were not destroyed";
  EXPECT_EQ(detail::thread_stack_pool()->outstanding(), 0u) << "a fiber stack was not released";
  return message;
}

// Six ranks, mesh P = 3 x R = 2: DP groups {0,2,4} and {1,3,5}. Calls:
// #0 all_gather on the DP group, #1 all_reduce on the world, #2 all_gather_v
// on the DP group, #3 barrier on the world.
void mesh_program(Communicator& comm) {
  const Guard guard;
  const MeshLayout mesh(6, 3);
  const Group dp = mesh.dp_group(comm.world_rank());
  std::vector<double> values{1.0 * comm.world_rank(), 2.0};
  comm.all_gather(dp, std::span<const double>(values));
  comm.all_reduce(comm.world(), std::span<double>(values), ReduceOp::sum);
  const std::vector<std::int64_t> counts{2, 2, 2};
  comm.all_gather_v(dp, std::span<const double>(values), counts);
  comm.barrier(comm.world());
}

SimulationOptions with_fault(std::int32_t rank, std::int64_t at, Kind kind,
                             Schedule schedule = {}) {
  SimulationOptions options;
  options.world_size = 6;
  options.schedule = schedule;
  options.fault = {rank, at, kind};
  return options;
}

TEST(Faults, MeshProgramRunsCleanWithoutFault) {
  run_fibers(with_fault(-1, 0, Kind::none), mesh_program);
  EXPECT_EQ(live_guards, 0);
}

TEST(Faults, WrongCollectiveNamesTheCollectiveGroupAndRanks) {
  const std::string message = failure_of(with_fault(1, 1, Kind::wrong_collective), mesh_program);
  EXPECT_EQ(message,
            "collective #0 on group 0 {0..5}: members call different collectives: world ranks "
            "{0,2..5} call all_reduce<double>(2 values, sum); world rank 1 calls barrier (its "
            "call #1)");
}

TEST(Faults, WrongCollectiveOnABarrier) {
  EXPECT_THAT(failure_of(with_fault(4, 3, Kind::wrong_collective), mesh_program),
              AllOf(HasSubstr("collective #1 on group 0 {0..5}"),
                    HasSubstr("world ranks {0..3,5} call barrier"),
                    HasSubstr("world rank 4 calls all_gather_object (its call #3)")));
}

TEST(Faults, WrongGroupIsADeadlockNamingBothGroups) {
  const std::string message = failure_of(with_fault(1, 0, Kind::wrong_group), mesh_program);
  EXPECT_THAT(
      message,
      AllOf(HasSubstr("deadlock"),
            HasSubstr("collective #0 all_gather<double>(2 values) on group 16777217 "
                      "{1,3,5} has world ranks {3,5} at call #0 and waits for world rank 1"),
            HasSubstr("different groups at the same step: world rank 1 made its call #0 "
                      "on group 16777217 {5,3,1} where world ranks {3,5} made it on group "
                      "16777217 {1,3,5}")));
}

TEST(Faults, WrongGroupOnTheWorld) {
  EXPECT_THAT(failure_of(with_fault(1, 1, Kind::wrong_group), mesh_program),
              AllOf(HasSubstr("collective #0 all_reduce<double>(2 values, sum) on group 0 {0..5} "
                              "has world ranks {0,2..5} at call #1 and waits for world rank 1"),
                    HasSubstr("world rank 1 made its call #1 on group 0 {5,4,..,0}")));
}

TEST(Faults, WrongSizeInAllGather) {
  EXPECT_EQ(failure_of(with_fault(1, 0, Kind::wrong_size), mesh_program),
            "collective #0 on group 16777217 {1,3,5}: members call different collectives: world "
            "ranks {3,5} call all_gather<double>(2 values); world rank 1 calls "
            "all_gather<double>(3 values) (its call #0)");
}

TEST(Faults, WrongSizeInAllReduce) {
  EXPECT_THAT(
      failure_of(with_fault(3, 1, Kind::wrong_size), mesh_program),
      AllOf(HasSubstr("collective #0 on group 0 {0..5}"),
            HasSubstr("world rank 3 calls all_reduce<double>(3 values, sum) (its call #1)")));
}

TEST(Faults, WrongSizeInAllGatherVAgainstAgreedCounts) {
  EXPECT_EQ(failure_of(with_fault(1, 2, Kind::wrong_size), mesh_program),
            "collective #1 on group 16777217 {1,3,5}: all_gather_v: world rank 1 (group rank 0, "
            "its call #2) gives 3 values but counts[0] = 2");
}

TEST(Faults, EarlyReturnIsADeadlockNamingTheReturnedRank) {
  EXPECT_EQ(failure_of(with_fault(1, 1, Kind::early_return), mesh_program),
            "deadlock: every live rank waits in a collective that cannot complete; collective #0 "
            "all_reduce<double>(2 values, sum) on group 0 {0..5} has world ranks {0,2..5} at call "
            "#1 and waits for world rank 1; world rank 1 returned after 1 collective call");
}

TEST(Faults, ThrowingRankIsNamedWithItsLastCollective) {
  EXPECT_EQ(failure_of(with_fault(1, 2, Kind::throw_error), mesh_program),
            "world rank 1 threw std::runtime_error: injected fault: world rank 1 throws at its "
            "collective call #2 after 2 collective calls (the last: collective #0 "
            "all_reduce<double>(2 values, sum) on group 0 {0..5})");
}

// The error of a fault does not depend on the schedule.
TEST(Faults, MessagesAreTheSameUnderEverySchedule) {
  for (const Kind kind : {Kind::wrong_collective, Kind::wrong_group, Kind::wrong_size,
                          Kind::early_return, Kind::throw_error}) {
    for (std::int64_t at = 0; at < 4; ++at) {
      if (kind == Kind::wrong_size && at == 3) continue;  // a barrier has no size
      const std::string fifo = failure_of(with_fault(3, at, kind), mesh_program);
      for (std::uint64_t seed = 1; seed <= 6; ++seed) {
        EXPECT_EQ(failure_of(with_fault(3, at, kind, {ScheduleKind::random, seed}), mesh_program),
                  fifo)
            << "fault kind " << static_cast<int>(kind) << " at " << at << ", seed " << seed;
      }
    }
  }
}

// Faults at 64 ranks with long programs still end fast, and the simulator is
// usable right after each.
TEST(Faults, EveryKindEndsFastAtSixtyFourRanksAndTheSimulatorRecovers) {
  const auto program = [](Communicator& comm) {
    const Guard guard;
    const MeshLayout mesh(64, 8);
    std::vector<double> values(16, 1.0);
    for (int step = 0; step < 50; ++step) {
      comm.all_gather(mesh.dp_group(comm.world_rank()), std::span<const double>(values));
      comm.all_reduce(comm.world(), std::span<double>(values), ReduceOp::mean);
    }
  };
  for (const Kind kind : {Kind::wrong_collective, Kind::wrong_group, Kind::wrong_size,
                          Kind::early_return, Kind::throw_error}) {
    SimulationOptions options;
    options.world_size = 64;
    options.schedule = {ScheduleKind::random, 42};
    options.fault = {37, 61, kind};
    EXPECT_THAT(failure_of(options, program), HasSubstr("37"));
    options.fault = {};
    run_fibers(options, program);
    EXPECT_EQ(live_guards, 0);
  }
}

struct CustomError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

TEST(Faults, RanksOwnExceptionIsNestedInTheSimulationError) {
  SimulationOptions options;
  options.world_size = 3;
  try {
    run_fibers(options, [](Communicator& comm) {
      comm.barrier(comm.world());
      if (comm.world_rank() == 2) throw CustomError("bad input on rank 2");
      comm.barrier(comm.world());
    });
    FAIL() << "no SimulationError";
  } catch (const SimulationError& e) {
    EXPECT_THAT(e.what(), HasSubstr("world rank 2 threw"));
    EXPECT_THAT(e.what(), HasSubstr("CustomError: bad input on rank 2"));
    EXPECT_THROW(std::rethrow_if_nested(e), CustomError);
  }
}

TEST(Faults, NaturalEarlyReturnIsADeadlock) {
  SimulationOptions options;
  options.world_size = 4;
  EXPECT_EQ(failure_of(options,
                       [](Communicator& comm) {
                         if (comm.world_rank() == 0) return;
                         comm.barrier(comm.world());
                       }),
            "deadlock: every live rank waits in a collective that cannot complete; collective #0 "
            "barrier on group 0 {0..3} has world ranks {1..3} at call #0 and waits for world rank "
            "0; world rank 0 returned after 0 collective calls");
}

TEST(Faults, MisusedGroupsAreErrors) {
  SimulationOptions options;
  options.world_size = 4;
  EXPECT_EQ(failure_of(options,
                       [](Communicator& comm) {
                         if (comm.world_rank() == 3) comm.barrier(Group{9, {0, 1}});
                       }),
            "collective #0 barrier on group 9 {0,1}: world rank 3 (its call #0) is not a member");
  EXPECT_EQ(failure_of(options,
                       [](Communicator& comm) {
                         comm.barrier(Group{9, {0, 1, 1}});
                       }),
            "barrier on group 9 {0,1,1}: world rank 1 is listed twice");
  EXPECT_EQ(failure_of(options,
                       [](Communicator& comm) {
                         comm.barrier(Group{9, {0, 4}});
                       }),
            "barrier on group 9 {0,4}: world rank 4 is outside 0..3");
  EXPECT_EQ(failure_of(options,
                       [](Communicator& comm) {
                         comm.barrier(Group{9, {}});
                       }),
            "barrier on group 9 {}: the group has no members");
}

TEST(Faults, DisagreeingArgumentsAreErrors) {
  SimulationOptions options;
  options.world_size = 3;
  EXPECT_EQ(failure_of(options,
                       [](Communicator& comm) {
                         double x = 0;
                         comm.broadcast(comm.world(), std::span<double>(&x, 1), 3);
                       }),
            "collective #0 on group 0 {0..2}: broadcast<double>(1 value, root 3): root 3 is not a "
            "group rank (3 members)");
  EXPECT_EQ(failure_of(options,
                       [](Communicator& comm) {
                         double x = 0;
                         comm.broadcast(comm.world(), std::span<double>(&x, 1), comm.world_rank());
                       }),
            "collective #0 on group 0 {0..2}: members call different collectives: world rank 0 "
            "calls broadcast<double>(1 value, root 0) (its call #0); world rank 1 calls "
            "broadcast<double>(1 value, root 1) (its call #0); world rank 2 calls "
            "broadcast<double>(1 value, root 2) (its call #0)");
  EXPECT_THAT(failure_of(options,
                         [](Communicator& comm) {
                           const std::vector<std::int64_t> counts{1, 1};
                           const double x = 0;
                           comm.all_gather_v(comm.world(), std::span<const double>(&x, 1), counts);
                         }),
              HasSubstr("all_gather_v: counts has 2 entries for 3 members"));
  EXPECT_THAT(failure_of(options,
                         [](Communicator& comm) {
                           const std::vector<std::int64_t> counts{1, 1, comm.world_rank()};
                           const double x = 0;
                           comm.all_gather_v(comm.world(), std::span<const double>(&x, 1), counts);
                         }),
              HasSubstr("world rank 2 calls all_gather_v<double>(counts [1,1,2])"));
  EXPECT_THAT(failure_of(options,
                         [](Communicator& comm) {
                           float x = 0;
                           comm.all_reduce(comm.world(), std::span<float>(&x, 1),
                                           comm.world_rank() == 1 ? ReduceOp::mean : ReduceOp::sum);
                         }),
              HasSubstr("world rank 1 calls all_reduce<float>(1 value, mean)"));
  EXPECT_THAT(failure_of(options,
                         [](Communicator& comm) {
                           if (comm.world_rank() == 2) {
                             const float x = 0;
                             comm.all_gather(comm.world(), std::span<const float>(&x, 1));
                           } else {
                             const double x = 0;
                             comm.all_gather(comm.world(), std::span<const double>(&x, 1));
                           }
                         }),
              HasSubstr("world rank 2 calls all_gather<float>(1 value)"));
}

// reduce_scatter_v is checked like all_gather_v: the same counts on every
// member, one per member, none negative, and every member giving their sum.
TEST(Faults, ReduceScatterVMisuseIsNamed) {
  SimulationOptions options;
  options.world_size = 3;
  const auto scatter = [](Communicator& comm, std::vector<std::int64_t> counts,
                          std::size_t values) {
    const std::vector<double> mine(values, 1.0);
    comm.reduce_scatter_v(comm.world(), std::span<const double>(mine), counts);
  };
  EXPECT_EQ(failure_of(options,
                       [&](Communicator& comm) {
                         scatter(comm, {1, 1}, 2);
                       }),
            "collective #0 on group 0 {0..2}: reduce_scatter_v: counts has 2 entries for 3 "
            "members");
  EXPECT_EQ(failure_of(options,
                       [&](Communicator& comm) {
                         scatter(comm, {2, -1, 2}, 3);
                       }),
            "collective #0 on group 0 {0..2}: reduce_scatter_v: counts[1] = -1 is negative");
  EXPECT_EQ(failure_of(options,
                       [&](Communicator& comm) {
                         scatter(comm, {1, 0, 2}, comm.world_rank() == 1 ? 2 : 3);
                       }),
            "collective #0 on group 0 {0..2}: reduce_scatter_v: world rank 1 (group rank 1, its "
            "call #0) gives 2 values but the counts sum to 3");
  EXPECT_EQ(failure_of(options,
                       [&](Communicator& comm) {
                         const std::int64_t last = comm.world_rank() == 2 ? 2 : 1;
                         scatter(comm, {1, 1, last}, static_cast<std::size_t>(2 + last));
                       }),
            "collective #0 on group 0 {0..2}: members call different collectives: world ranks "
            "{0,1} call reduce_scatter_v<double>(counts [1,1,1]); world rank 2 calls "
            "reduce_scatter_v<double>(counts [1,1,2]) (its call #0)");
  EXPECT_THAT(failure_of(options,
                         [&](Communicator& comm) {
                           const std::vector<std::int64_t> counts{1, 1, 1};
                           if (comm.world_rank() == 0) {
                             const std::vector<float> mine(3, 1.0f);
                             comm.reduce_scatter_v(comm.world(), std::span<const float>(mine),
                                                   counts);
                           } else {
                             scatter(comm, counts, 3);
                           }
                         }),
              HasSubstr("world rank 0 calls reduce_scatter_v<float>(counts [1,1,1]) (its call "
                        "#0)"));
  EXPECT_THAT(failure_of(options,
                         [&](Communicator& comm) {
                           if (comm.world_rank() == 1) {
                             std::vector<double> mine(3, 1.0);
                             comm.all_reduce(comm.world(), std::span<double>(mine), ReduceOp::sum);
                           } else {
                             scatter(comm, {1, 1, 1}, 3);
                           }
                         }),
              HasSubstr("world rank 1 calls all_reduce<double>(3 values, sum) (its call #0)"));
}

// Injected faults reach reduce_scatter_v as they reach the other collectives.
TEST(Faults, InjectedFaultsInReduceScatterV) {
  const auto program = [](Communicator& comm) {
    const Guard guard;
    const MeshLayout mesh(6, 3);
    const std::vector<std::int64_t> counts{2, 0, 1};
    const std::vector<double> mine(3, 0.5 * comm.world_rank());
    comm.reduce_scatter_v(mesh.dp_group(comm.world_rank()), std::span<const double>(mine), counts);
    comm.barrier(comm.world());
  };
  run_fibers(with_fault(-1, 0, Kind::none), program);
  EXPECT_EQ(failure_of(with_fault(3, 0, Kind::wrong_size), program),
            "collective #0 on group 16777217 {1,3,5}: reduce_scatter_v: world rank 3 (group rank "
            "1, its call #0) gives 4 values but the counts sum to 3");
  EXPECT_EQ(failure_of(with_fault(0, 0, Kind::wrong_collective), program),
            "collective #0 on group 16777216 {0,2,4}: members call different collectives: world "
            "ranks {2,4} call reduce_scatter_v<double>(counts [2,0,1]); world rank 0 calls barrier "
            "(its call #0)");
  EXPECT_THAT(failure_of(with_fault(5, 0, Kind::wrong_group), program),
              AllOf(HasSubstr("deadlock"),
                    HasSubstr("collective #0 reduce_scatter_v<double>(3 values) on group "
                              "16777217 {1,3,5} has world ranks {1,3} at call #0 and waits for "
                              "world rank 5")));
  EXPECT_THAT(failure_of(with_fault(2, 0, Kind::throw_error), program),
              HasSubstr("world rank 2 threw std::runtime_error: injected fault"));
}

// The abort signal is not a std::exception: a program's own handler cannot
// swallow it and keep a rank alive.
TEST(Faults, ProgramsCatchingStdExceptionStillUnwind) {
  SimulationOptions options;
  options.world_size = 3;
  int caught = 0;
  const std::string message = failure_of(options, [&caught](Communicator& comm) {
    const Guard guard;
    if (comm.world_rank() == 1) throw std::logic_error("rank 1 fails");
    try {
      comm.barrier(comm.world());
    } catch (const std::exception&) {
      ++caught;
    }
  });
  EXPECT_EQ(caught, 0);
  EXPECT_THAT(message, HasSubstr("world rank 1 threw std::logic_error: rank 1 fails"));
}

TEST(Faults, NestedSimulationIsAnError) {
  SimulationOptions options;
  options.world_size = 2;
  EXPECT_THAT(
      failure_of(options, [&options](Communicator&) { run_fibers(options, [](Communicator&) {}); }),
      HasSubstr("simulations do not nest"));
}

TEST(Faults, WrongSizeOnABarrierIsSkipped) {
  run_fibers(with_fault(3, 3, Kind::wrong_size), mesh_program);
  EXPECT_EQ(live_guards, 0);
}

TEST(Faults, FaultsOnSingleMemberGroupsAreSkipped) {
  SimulationOptions options;
  options.world_size = 2;
  for (const Kind kind : {Kind::wrong_collective, Kind::wrong_size}) {
    options.fault = {1, 0, kind};
    std::vector<double> result;
    run_fibers(options, [&result](Communicator& comm) {
      const double x = comm.world_rank();
      const auto gathered =
          comm.all_gather(Group{5, {comm.world_rank()}}, std::span<const double>(&x, 1));
      if (comm.world_rank() == 1) result = gathered;
    });
    EXPECT_EQ(result, std::vector<double>{1.0});
  }
}

}  // namespace
}  // namespace infonce::sim
