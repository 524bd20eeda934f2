// The in-memory collectives behind the fiber simulator (internal to sim/).
//
// Matching. A group is identified by its id and its ordered member list. Its
// members' k-th calls on it form its collective #k (the sequence number in
// every message). A member blocks in collective #k until the last member
// arrives; so at most one collective per group is in progress, and the last
// arriver completes it: it checks that all members made compatible calls,
// computes the result once (in group-rank order, whatever the arrival order),
// hands every member a shared read-only outcome and wakes them.
//
// Failure. Any misuse, a deadlock (every live rank blocked: nothing can ever
// wake them, since only ranks wake ranks), or a rank's exception records the
// first error, wakes every waiting rank and makes every later collective call
// throw SimulationAborted, so each rank program unwinds and its fiber ends.
// Messages are built from the state alone (never from which fiber noticed),
// so they do not depend on the schedule.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include <boost/fiber/context.hpp>

#include "sim/collective_call.hpp"
#include "sim/communicator.hpp"
#include "sim/fiber_simulation.hpp"

namespace infonce::sim::detail {

// Thrown through a rank program once the simulation has failed. Not a
// std::exception, so `catch (const std::exception&)` in a program lets it pass.
struct SimulationAborted {};
// Thrown by the early_return fault: the program ends as if it had returned.
struct InjectedEarlyReturn {};

// A completed collective's result, shared by its members.
struct Outcome {
  using Values = std::variant<std::monostate, std::vector<double>, std::vector<float>,
                              std::vector<std::int64_t>, std::vector<std::byte>>;
  Values values;  // gathered, reduced or broadcast values
  // all_gather_object, reduce_scatter_v: member i's part is [offsets[i], offsets[i+1])
  std::vector<std::int64_t> offsets;
  std::vector<Group> groups;                  // split: the groups formed, by ascending color
  std::vector<std::int32_t> group_of_member;  // split: index into groups, -1 for color < 0
};

// One member's call; lives in the caller's frame, which outlives its wait.
struct Call {
  Signature signature;
  const void* data = nullptr;            // `signature.count` elements
  std::span<const std::int64_t> counts;  // all_gather_v, reduce_scatter_v
  std::int32_t color = 0;                // split
  std::int32_t key = 0;                  // split
  std::int32_t world_rank = -1;
  std::int64_t call_number = -1;  // how many collectives this rank called before

  // Filled in by the engine.
  std::int32_t group_rank = -1;
  std::shared_ptr<const Outcome> outcome;  // set when the collective completed
  boost::fibers::context* waiter = nullptr;
};

// A point-to-point message in flight (SPEC section 16).
struct Message {
  ElementType element = ElementType::none;
  std::int64_t count = 0;
  std::vector<std::byte> bytes;   // count values of `element`
  std::int64_t call_number = -1;  // the sender's
};

// A member's recv; lives in the caller's frame, which outlives its wait.
struct Receive {
  ElementType element = ElementType::none;
  std::int64_t count = 0;
  std::byte* out = nullptr;  // count values of `element`
  std::int32_t world_rank = -1;
  std::int64_t call_number = -1;
  bool delivered = false;  // set by the engine
  boost::fibers::context* waiter = nullptr;
};

struct GroupState {
  Group group;
  std::vector<std::int32_t> group_rank_of;  // by world rank; -1 for non-members
  std::int64_t op_index = 0;                // the collective in progress (= completed ones)
  std::vector<Call*> calls;                 // by group rank; nullptr until arrived
  std::int32_t arrived = 0;
};

class Engine {
 public:
  explicit Engine(const SimulationOptions& options);
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const SimulationOptions& options() const { return options_; }
  std::int32_t world_size() const { return options_.world_size; }
  // The world group, built once: every rank asks for it (split, the DDP
  // all-reduce), and building it is O(P).
  const Group& world_group() const { return world_group_; }
  bool failed() const { return failure_.has_value(); }
  // Whether every collective call starts with a yield (random schedules only:
  // one more suspension point where the interleaving can change).
  bool yields_at_calls() const { return options_.schedule.kind == ScheduleKind::random; }
  FaultInjection::Kind fault_for(std::int32_t rank, std::int64_t call_number) const;

  // Joins `call` to the group's collective in progress and returns when it has
  // completed, with call.outcome set. Throws SimulationAborted if the
  // simulation has failed (because of this call or anything else).
  void arrive(Call& call, const Group& group);

  // Point-to-point (message_passing.cpp). send queues `message` from
  // `world_rank` to group rank `peer`, or hands it to that member's waiting
  // recv; receive returns once the channel's next message has arrived, with
  // receive.out filled in. Both throw SimulationAborted once the simulation
  // has failed (a bad peer, a message that does not match, a deadlock).
  void send(const Group& group, std::int32_t world_rank, std::int32_t peer, Message message);
  void receive(const Group& group, std::int32_t peer, Receive& receive);
  // After the last rank ended: a message still queued fails the run.
  void fail_on_undelivered();

  // A rank's program ended; `error` is what it threw (null: it returned).
  void rank_finished(std::int32_t rank, std::exception_ptr error);
  // Fewer fibers than ranks could be started (`error` says why).
  void abandon_unstarted(std::int32_t started, const std::string& error);
  // Suspends the calling (main) context until every rank has finished.
  void wait_for_ranks();
  // Throws the recorded failure as SimulationError (a rank's own exception
  // nested inside it), if any.
  void throw_if_failed() const;

 private:
  enum class Status : std::uint8_t { running, waiting, returned, threw };
  struct RankState {
    Status status = Status::running;
    std::int64_t calls = 0;             // collectives it arrived at
    const GroupState* group = nullptr;  // where it arrived last
    std::int64_t op_index = -1;         // and that collective's number
    Signature signature;                // and what it called
    std::string receiving;              // while blocked in recv: what and from whom
  };
  // One FIFO per (group, sender, receiver), ordered for messages.
  struct ChannelKey {
    std::int32_t group_id = 0;
    std::vector<std::int32_t> members;
    std::int32_t from = 0;  // world ranks
    std::int32_t to = 0;
    auto operator<=>(const ChannelKey&) const = default;
  };
  struct Channel {
    std::deque<Message> queue;
    Receive* receiver = nullptr;  // a member blocked in recv on this channel
  };
  struct Failure {
    std::string message;
    std::exception_ptr cause;
  };
  struct GroupKeyLess {
    using is_transparent = void;
    bool operator()(const Group& a, const Group& b) const;
  };

  // `site` names the call in an error message (built only on failure).
  GroupState& state_of(const Group& group, const std::function<std::string()>& site);
  GroupState& state_of(const Group& group, const Call& call);
  // The peer's world rank, after checking the caller and the peer are two members.
  std::int32_t peer_world_rank(const Group& group, std::int32_t world_rank, std::int32_t peer,
                               const std::function<std::string()>& site);
  void deliver(const ChannelKey& key, Message& message, Receive& receive);
  std::string receive_deadlock_text() const;
  void complete(GroupState& state);
  std::shared_ptr<const Outcome> compute(const GroupState& state);
  std::optional<std::string> find_disagreement(const GroupState& state) const;
  std::string deadlock_message() const;
  std::string where_is(std::int32_t rank) const;
  std::string call_site(const GroupState& state, const Call& call) const;
  // Records the first failure and wakes every waiting rank.
  void fail(std::string message, std::exception_ptr cause = nullptr);
  [[noreturn]] void fail_here(std::string message);

  SimulationOptions options_;
  Group world_group_;
  // Every group called, ordered (messages list them in this order) ...
  std::map<Group, std::unique_ptr<GroupState>, GroupKeyLess> groups_;
  // ... and indexed by a constant-time key for lookups (never iterated).
  std::unordered_map<std::uint64_t, std::vector<GroupState*>> index_;
  std::vector<RankState> ranks_;
  std::int32_t live_ = 0;     // ranks whose program has not ended
  std::int32_t waiting_ = 0;  // ranks blocked in a collective not yet complete
  std::int32_t next_split_id_ = 1;
  boost::fibers::context* main_waiter_ = nullptr;
  std::optional<Failure> failure_;
  std::map<ChannelKey, Channel> channels_;
};

}  // namespace infonce::sim::detail
