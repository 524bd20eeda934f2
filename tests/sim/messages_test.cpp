// Point-to-point messages on the fiber simulator (SPEC section 16): ring
// steps deliver each member's values one place on, in order per channel,
// whatever the schedule; a recv no send satisfies, a message of another size
// or type, one never received, a bad peer and the message faults are named
// SimulationErrors, well under a second, every fiber unwound.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "sim/fiber_simulation.hpp"
#include "sim/ring.hpp"
#include "sim/stack_pool.hpp"
#include "tests/sim/sim_test_support.hpp"

namespace infonce::sim {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

std::string failure_of(const SimulationOptions& options, const RankProgram& program) {
  const auto start = std::chrono::steady_clock::now();
  std::string message;
  try {
    run_fibers(options, program);
    ADD_FAILURE() << "no SimulationError";
  } catch (const SimulationError& e) {
    message = e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  EXPECT_EQ(detail::thread_stack_pool()->outstanding(), 0u) << "a fiber stack was not released";
  return message;
}

SimulationOptions world_of(std::int32_t size) {
  SimulationOptions options;
  options.world_size = size;
  return options;
}

// Member d's values: d + 0.25 i, i < d + 1 (members differ in size).
std::vector<double> values_of(std::int32_t d) {
  std::vector<double> out;
  for (std::int32_t i = 0; i <= d; ++i) out.push_back(d + 0.25 * i);
  return out;
}

RC_GTEST_PROP(Messages, ARingStepMovesEveryMembersValuesOnePlace, ()) {
  const auto world = *rc::gen::inRange<std::int32_t>(1, 7);
  const Group group = *testing::gen_group(world);
  const bool forward = *rc::gen::arbitrary<bool>();
  SimulationOptions options = world_of(world);
  options.schedule = *testing::gen_schedule();
  std::vector<std::vector<double>> got(static_cast<std::size_t>(world));
  run_fibers(options, [&](Communicator& comm) {
    const std::int32_t me = group.rank_of(comm.world_rank());
    if (me < 0) {
      comm.check_messages_delivered();  // a collective over the world
      return;
    }
    const std::int32_t size = group.size();
    const std::int32_t from = forward ? (me + size - 1) % size : (me + 1) % size;
    const std::vector<double> mine = values_of(me);
    got[static_cast<std::size_t>(comm.world_rank())] =
        ring_shift<double>(comm, group, mine, values_of(from).size(),
                           forward ? RingDirection::to_next : RingDirection::to_previous);
    comm.check_messages_delivered();
  });
  for (std::int32_t m = 0; m < group.size(); ++m) {
    const std::int32_t from =
        forward ? (m + group.size() - 1) % group.size() : (m + 1) % group.size();
    RC_ASSERT(got[static_cast<std::size_t>(group.world_ranks[static_cast<std::size_t>(m)])] ==
              values_of(from));
  }
}

TEST(Messages, OneChannelDeliversInTheOrderSent) {
  std::vector<float> got;
  run_fibers(world_of(2), [&](Communicator& comm) {
    const Group world = comm.world();
    if (comm.world_rank() == 0) {
      for (float v = 1; v <= 5; ++v) comm.send(world, 1, std::span<const float>(&v, 1));
      return;
    }
    for (int i = 0; i < 5; ++i) {
      float v = 0;
      comm.recv(world, 0, std::span<float>(&v, 1));
      got.push_back(v);
    }
  });
  EXPECT_EQ(got, (std::vector<float>{1, 2, 3, 4, 5}));
}

// Rank 1 receives first, rank 0 sends later: the recv waits, then gets it.
TEST(Messages, ARecvWaitsForItsSend) {
  double got = 0;
  run_fibers(world_of(2), [&](Communicator& comm) {
    const Group world = comm.world();
    if (comm.world_rank() == 1) {
      comm.recv(world, 0, std::span<double>(&got, 1));
    } else {
      comm.barrier(Group{7, {0}});  // something else first
      const double v = 2.5;
      comm.send(world, 1, std::span<const double>(&v, 1));
    }
  });
  EXPECT_EQ(got, 2.5);
}

TEST(Messages, ARecvNoSendSatisfiesIsANamedDeadlock) {
  const std::string message = failure_of(world_of(2), [](Communicator& comm) {
    std::vector<double> out(2);
    comm.recv(comm.world(), 1 - comm.world_rank(), std::span<double>(out));
  });
  EXPECT_THAT(message, AllOf(HasSubstr("deadlock"), HasSubstr("or a recv"),
                             HasSubstr("world rank 0 waits in recv<double>(2 values) from world "
                                       "rank 1 on group 0"),
                             HasSubstr("world rank 1 waits in recv<double>(2 values) from world "
                                       "rank 0")));
}

TEST(Messages, AMessageOfAnotherSizeOrTypeIsNamed) {
  const auto program = [](bool other_type) {
    return [other_type](Communicator& comm) {
      if (comm.world_rank() == 0) {
        const std::vector<double> v{1, 2, 3};
        comm.send(comm.world(), 1, std::span<const double>(v));
        return;
      }
      if (other_type) {
        std::vector<float> out(3);
        comm.recv(comm.world(), 0, std::span<float>(out));
      } else {
        std::vector<double> out(2);
        comm.recv(comm.world(), 0, std::span<double>(out));
      }
    };
  };
  EXPECT_THAT(failure_of(world_of(2), program(false)),
              HasSubstr("message from world rank 0 (its call #0) to world rank 1 (its call #0): "
                        "send<double>(3 values) met recv<double>(2 values)"));
  EXPECT_THAT(failure_of(world_of(2), program(true)),
              HasSubstr("send<double>(3 values) met recv<float>(3 values)"));
}

TEST(Messages, AMessageNeverReceivedFailsTheRun) {
  EXPECT_THAT(failure_of(world_of(3),
                         [](Communicator& comm) {
                           if (comm.world_rank() != 2) return;
                           const double v = 1;
                           comm.send(comm.world(), 0, std::span<const double>(&v, 1));
                           comm.send(comm.world(), 1, std::span<const double>(&v, 1));
                         }),
              HasSubstr("2 messages never received; the first: send<double>(1 value) from world "
                        "rank 2 (its call #0) to world rank 0 on group 0"));
}

// check_messages_delivered inside the step names the pair (the fiber run's
// own end check would name it too, later).
TEST(Messages, CheckMessagesDeliveredNamesThePair) {
  EXPECT_THAT(failure_of(world_of(2),
                         [](Communicator& comm) {
                           if (comm.world_rank() == 1) {
                             const double v = 1;
                             comm.send(comm.world(), 0, std::span<const double>(&v, 1));
                           }
                           comm.check_messages_delivered();
                         }),
              HasSubstr("messages: world rank 1 sent 1 to world rank 0, which received 0 of them"));
}

TEST(Messages, APeerThatIsNotAnotherMemberIsNamed) {
  const double v = 1;
  EXPECT_THAT(failure_of(world_of(2),
                         [&](Communicator& comm) {
                           comm.send(comm.world(), comm.world_rank(),
                                     std::span<const double>(&v, 1));
                         }),
              HasSubstr("is not another group rank of group 0"));
  EXPECT_THAT(failure_of(world_of(2),
                         [&](Communicator& comm) {
                           comm.send(comm.world(), 5, std::span<const double>(&v, 1));
                         }),
              HasSubstr("peer 5 is not another group rank"));
  EXPECT_THAT(failure_of(world_of(3),
                         [&](Communicator& comm) {
                           if (comm.world_rank() == 2) {
                             comm.send(Group{4, {0, 1}}, 0, std::span<const double>(&v, 1));
                           }
                         }),
              HasSubstr("world rank 2 is not a member"));
}

// The message faults: a lost send leaves its receiver waiting (a deadlock);
// a send of one more value meets its recv's size.
TEST(Messages, MessageFaultsAreNamed) {
  const auto ring = [](Communicator& comm) {
    const std::vector<double> mine{1.0 * comm.world_rank(), 2};
    ring_shift<double>(comm, comm.world(), mine, 2, RingDirection::to_next);
  };
  SimulationOptions dropped = world_of(3);
  dropped.fault = {1, 0, FaultInjection::Kind::drop_message};
  EXPECT_THAT(failure_of(dropped, ring),
              AllOf(HasSubstr("deadlock"),
                    HasSubstr("world rank 2 waits in recv<double>(2 values) from world rank 1")));
  SimulationOptions padded = world_of(3);
  padded.fault = {1, 0, FaultInjection::Kind::wrong_size};
  EXPECT_THAT(failure_of(padded, ring),
              HasSubstr("message from world rank 1 (its call #0) to world rank 2 (its call #1): "
                        "send<double>(3 values) met recv<double>(2 values)"));
}

// The simulator works again after a failed run.
TEST(Messages, TheSimulatorRunsAgainAfterAFailure) {
  failure_of(world_of(2), [](Communicator& comm) {
    double v = 0;
    comm.recv(comm.world(), 1 - comm.world_rank(), std::span<double>(&v, 1));
  });
  double got = 0;
  run_fibers(world_of(2), [&](Communicator& comm) {
    const double v = 3;
    comm.send(comm.world(), 1 - comm.world_rank(), std::span<const double>(&v, 1));
    double in = 0;
    comm.recv(comm.world(), 1 - comm.world_rank(), std::span<double>(&in, 1));
    if (comm.world_rank() == 0) got = in;
  });
  EXPECT_EQ(got, 3);
}

}  // namespace
}  // namespace infonce::sim
