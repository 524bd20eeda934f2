// The fiber engine's point-to-point messages (SPEC section 16): one FIFO
// channel per (group, sender, receiver). A send never blocks; a recv takes
// the channel's next message or waits for it, and counts as waiting for the
// deadlock check, so a recv no send can satisfy ends the run with a named
// error. What is left in a channel when every rank has ended fails the run.
#include <cstring>
#include <string>
#include <utility>

#include "sim/collective_engine.hpp"
#include "sim/rank_format.hpp"

namespace infonce::sim::detail {

namespace {

std::string sender_text(std::int32_t world_rank, std::int64_t call_number) {
  return "world rank " + std::to_string(world_rank) + " (its call #" + std::to_string(call_number) +
         ")";
}

std::size_t element_bytes(ElementType element) {
  switch (element) {
    case ElementType::f64:
    case ElementType::i64:
      return 8;
    case ElementType::f32:
      return 4;
    case ElementType::byte:
      return 1;
    case ElementType::none:
      break;
  }
  return 0;
}

}  // namespace

std::int32_t Engine::peer_world_rank(const Group& group, std::int32_t world_rank, std::int32_t peer,
                                     const std::function<std::string()>& site) {
  const GroupState& state = state_of(group, site);
  const std::int32_t own = state.group_rank_of[static_cast<std::size_t>(world_rank)];
  if (own < 0) {
    fail_here(site() + ": world rank " + std::to_string(world_rank) + " is not a member");
  }
  if (peer < 0 || peer >= group.size() || peer == own) {
    fail_here(site() + ": peer " + std::to_string(peer) + " is not another group rank of " +
              format_group(group) + " (the caller is group rank " + std::to_string(own) + ")");
  }
  return group.world_ranks[static_cast<std::size_t>(peer)];
}

void Engine::send(const Group& group, std::int32_t world_rank, std::int32_t peer, Message message) {
  if (failed()) throw SimulationAborted{};
  const auto site = [&] {
    return describe_message("send", message.element, message.count) + " by " +
           sender_text(world_rank, message.call_number) + " on " + format_group(group);
  };
  const std::int32_t to = peer_world_rank(group, world_rank, peer, site);
  ranks_[static_cast<std::size_t>(world_rank)].calls = message.call_number + 1;
  const ChannelKey key{group.id, group.world_ranks, world_rank, to};
  Channel& channel = channels_[key];
  if (channel.receiver == nullptr) {
    channel.queue.push_back(std::move(message));
    return;
  }
  // Still registered while delivering: a mismatch fails the run, and fail()
  // wakes the receiver through its channel.
  Receive& receive = *channel.receiver;
  deliver(key, message, receive);
  channel.receiver = nullptr;
  RankState& receiver = ranks_[static_cast<std::size_t>(to)];
  receiver.status = Status::running;
  receiver.receiving.clear();
  --waiting_;
  boost::fibers::context::active()->schedule(std::exchange(receive.waiter, nullptr));
}

void Engine::receive(const Group& group, std::int32_t peer, Receive& receive) {
  if (failed()) throw SimulationAborted{};
  const auto site = [&] {
    return describe_message("recv", receive.element, receive.count) + " by " +
           sender_text(receive.world_rank, receive.call_number) + " on " + format_group(group);
  };
  const std::int32_t from = peer_world_rank(group, receive.world_rank, peer, site);
  RankState& rank = ranks_[static_cast<std::size_t>(receive.world_rank)];
  rank.calls = receive.call_number + 1;
  const ChannelKey key{group.id, group.world_ranks, from, receive.world_rank};
  Channel& channel = channels_[key];
  INFONCE_ASSERT(channel.receiver == nullptr);
  if (!channel.queue.empty()) {
    Message message = std::move(channel.queue.front());
    channel.queue.pop_front();
    deliver(key, message, receive);
    return;
  }
  channel.receiver = &receive;
  receive.waiter = boost::fibers::context::active();
  rank.status = Status::waiting;
  rank.receiving = describe_message("recv", receive.element, receive.count) + " from world rank " +
                   std::to_string(from) + " on " + format_group(group) + " (its call #" +
                   std::to_string(receive.call_number) + ")";
  ++waiting_;
  // Only ranks wake ranks: with none left running, no message can come.
  if (waiting_ == live_) fail_here(deadlock_message());
  receive.waiter->suspend();
  // Resumed by send() (delivered) or by fail() (not).
  if (!receive.delivered) throw SimulationAborted{};
}

// The message must be what the recv expects; the text names both calls, so
// it is the same whichever of the two fibers noticed.
void Engine::deliver(const ChannelKey& key, Message& message, Receive& receive) {
  if (message.element != receive.element || message.count != receive.count) {
    fail_here("message from " + sender_text(key.from, message.call_number) + " to " +
              sender_text(key.to, receive.call_number) + ": " +
              describe_message("send", message.element, message.count) + " met " +
              describe_message("recv", receive.element, receive.count));
  }
  const std::size_t bytes =
      static_cast<std::size_t>(message.count) * element_bytes(message.element);
  INFONCE_ASSERT(message.bytes.size() == bytes);
  if (bytes > 0) std::memcpy(receive.out, message.bytes.data(), bytes);
  receive.delivered = true;
}

std::string Engine::receive_deadlock_text() const {
  std::string text;
  for (std::size_t w = 0; w < ranks_.size(); ++w) {
    const RankState& r = ranks_[w];
    if (!r.receiving.empty())
      text += "; world rank " + std::to_string(w) + " waits in " + r.receiving;
  }
  return text;
}

void Engine::fail_on_undelivered() {
  if (failed()) return;
  std::int64_t left = 0;
  std::string first;
  for (const auto& [key, channel] : channels_) {
    if (channel.queue.empty()) continue;
    left += static_cast<std::int64_t>(channel.queue.size());
    if (!first.empty()) continue;
    const Message& m = channel.queue.front();
    first = describe_message("send", m.element, m.count) + " from " +
            sender_text(key.from, m.call_number) + " to world rank " + std::to_string(key.to) +
            " on " + format_group(Group{key.group_id, key.members});
  }
  if (left == 0) return;
  fail(counted(left, "message") + " never received; the first: " + first);
}

}  // namespace infonce::sim::detail
