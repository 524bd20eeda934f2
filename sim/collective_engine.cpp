#include "sim/collective_engine.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>
#include <tuple>
#include <utility>

#include <boost/core/demangle.hpp>

#include "base/assert.hpp"
#include "base/error.hpp"
#include "base/rng.hpp"
#include "sim/determinism.hpp"
#include "sim/mesh.hpp"
#include "sim/rank_format.hpp"

namespace infonce::sim::detail {

namespace {

// What a member's call must match, as text (equal text <=> compatible calls).
std::string agreement_key(const Call& call) {
  if (!takes_counts(call.signature.kind)) return describe(call.signature);
  return std::string(kind_name(call.signature.kind)) + "<" + element_name(call.signature.element) +
         ">(counts " + format_counts(call.counts) + ")";
}

bool compatible(const Call& a, const Call& b) {
  return signatures_agree(a.signature, b.signature, std::ranges::equal(a.counts, b.counts));
}

// What counts_problem needs of each member's call, in group-rank order.
std::optional<std::string> counts_problem(const GroupState& state) {
  std::vector<MemberCall> members;
  members.reserve(state.calls.size());
  for (const Call* call : state.calls) {
    members.push_back({call->world_rank, call->call_number, call->signature.count});
  }
  const Call& first = *state.calls[0];
  return counts_problem(first.signature.kind, first.counts, members);
}

// " at call #4" when every member present made this collective its call #4.
std::string at_call_text(const GroupState& state) {
  std::int64_t number = -1;
  for (const Call* call : state.calls) {
    if (call == nullptr) continue;
    if (number >= 0 && call->call_number != number) return "";
    number = call->call_number;
  }
  return " at call #" + std::to_string(number);
}

std::string exception_text(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return boost::core::demangle(typeid(e).name()) + ": " + e.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

template <class T>
const T* data_of(const Call& call) {
  return static_cast<const T*>(call.data);
}

template <class T>
void append(std::vector<T>& out, const Call& call) {
  const auto count = static_cast<std::size_t>(call.signature.count);
  if (count > 0) out.insert(out.end(), data_of<T>(call), data_of<T>(call) + count);
}

template <class T>
std::vector<T> concatenate(const GroupState& state) {
  std::size_t total = 0;
  for (const Call* call : state.calls) total += static_cast<std::size_t>(call->signature.count);
  std::vector<T> out;
  out.reserve(total);
  for (const Call* call : state.calls) append(out, *call);
  return out;
}

// Sum (then, for mean, divide by the member count) in the order given: the
// accumulator starts as member order[0]'s values and adds the others one by
// one, element-wise, in Scalar arithmetic.
template <class T>
std::vector<T> reduce(const GroupState& state, std::span<const std::int32_t> order, ReduceOp op) {
  const auto count = static_cast<std::size_t>(state.calls[0]->signature.count);
  std::vector<T> sum(count);
  if (count == 0) return sum;
  std::memcpy(sum.data(), data_of<T>(*state.calls[static_cast<std::size_t>(order[0])]),
              count * sizeof(T));
  for (std::size_t k = 1; k < order.size(); ++k) {
    const T* values = data_of<T>(*state.calls[static_cast<std::size_t>(order[k])]);
    for (std::size_t j = 0; j < count; ++j) sum[j] += values[j];
  }
  if (op == ReduceOp::mean) {
    const T members = static_cast<T>(order.size());
    for (T& value : sum) value /= members;
  }
  return sum;
}

template <class T>
std::vector<T> copy_of_root(const GroupState& state) {
  std::vector<T> out;
  append(out, *state.calls[static_cast<std::size_t>(state.calls[0]->signature.root)]);
  return out;
}

// Default: group-rank order. With a seed: a permutation that is a function of
// the seed, the group and the collective's number (never of the schedule).
std::vector<std::int32_t> summation_order(const GroupState& state,
                                          const std::optional<std::uint64_t>& seed) {
  std::vector<std::int32_t> order(state.calls.size());
  std::iota(order.begin(), order.end(), 0);
  if (seed.has_value()) {
    std::uint64_t identity = fnv1a64_u64(static_cast<std::uint64_t>(state.group.id));
    for (const std::int32_t w : state.group.world_ranks) {
      identity = fnv1a64_u64(static_cast<std::uint64_t>(w), identity);
    }
    Rng rng(derive_seed(derive_seed(*seed, identity), static_cast<std::uint64_t>(state.op_index)));
    for (std::size_t i = order.size(); i-- > 1;) {
      std::swap(order[i], order[static_cast<std::size_t>(rng.below(i + 1))]);
    }
  }
  return order;
}

template <class Make>
Outcome::Values by_element(ElementType element, Make&& make) {
  switch (element) {
    case ElementType::f64:
      return make(double{});
    case ElementType::f32:
      return make(float{});
    case ElementType::i64:
      return make(std::int64_t{});
    case ElementType::byte:
      return make(std::byte{});
    case ElementType::none:
      break;
  }
  INFONCE_ASSERT(false);
  return {};
}

}  // namespace

bool Engine::GroupKeyLess::operator()(const Group& a, const Group& b) const {
  if (a.id != b.id) return a.id < b.id;
  return std::ranges::lexicographical_compare(a.world_ranks, b.world_ranks);
}

Engine::Engine(const SimulationOptions& options)
    : options_(options),
      world_group_(options.world_size >= 1 ? world_group_of(options.world_size) : Group{0, {}}),
      ranks_(static_cast<std::size_t>(options.world_size)),
      live_(options.world_size) {}

FaultInjection::Kind Engine::fault_for(std::int32_t rank, std::int64_t call_number) const {
  const FaultInjection& fault = options_.fault;
  return (fault.rank == rank && fault.at_collective == call_number) ? fault.kind
                                                                    : FaultInjection::Kind::none;
}

std::string Engine::call_site(const GroupState& state, const Call& call) const {
  return "collective #" + std::to_string(state.op_index) + " " + describe(call.signature) + " on " +
         format_group(state.group);
}

namespace {

// A constant-time key: id, size and three members. Equal groups have equal keys.
std::uint64_t quick_key(const Group& group) {
  const auto& ranks = group.world_ranks;
  std::uint64_t key = (static_cast<std::uint64_t>(static_cast<std::uint32_t>(group.id)) << 32) |
                      static_cast<std::uint32_t>(ranks.size());
  if (!ranks.empty()) {
    for (const std::int32_t w : {ranks.front(), ranks[ranks.size() / 2], ranks.back()}) {
      key = (key ^ static_cast<std::uint32_t>(w)) * 0x9e3779b97f4a7c15ULL;
      key ^= key >> 29;
    }
  }
  return key;
}

bool same_group(const Group& a, const Group& b) {
  return a.id == b.id && a.world_ranks.size() == b.world_ranks.size() &&
         (a.world_ranks.empty() || std::memcmp(a.world_ranks.data(), b.world_ranks.data(),
                                               a.world_ranks.size() * sizeof(std::int32_t)) == 0);
}

}  // namespace

GroupState& Engine::state_of(const Group& group, const Call& call) {
  return state_of(group, [&] { return describe(call.signature) + " on " + format_group(group); });
}

GroupState& Engine::state_of(const Group& group, const std::function<std::string()>& site) {
  std::vector<GroupState*>& candidates = index_[quick_key(group)];
  for (GroupState* candidate : candidates) {
    if (same_group(candidate->group, group)) return *candidate;
  }
  if (group.world_ranks.empty()) fail_here(site() + ": the group has no members");
  std::vector<std::int32_t> group_rank_of(static_cast<std::size_t>(world_size()), -1);
  for (std::int32_t i = 0; i < group.size(); ++i) {
    const std::int32_t w = group.world_ranks[static_cast<std::size_t>(i)];
    if (w < 0 || w >= world_size()) {
      fail_here(site() + ": world rank " + std::to_string(w) + " is outside 0.." +
                std::to_string(world_size() - 1));
    }
    if (group_rank_of[static_cast<std::size_t>(w)] >= 0) {
      fail_here(site() + ": world rank " + std::to_string(w) + " is listed twice");
    }
    group_rank_of[static_cast<std::size_t>(w)] = i;
  }
  auto state = std::make_unique<GroupState>();
  state->group = group;
  state->group_rank_of = std::move(group_rank_of);
  state->calls.assign(group.world_ranks.size(), nullptr);
  GroupState* created = groups_.emplace(group, std::move(state)).first->second.get();
  candidates.push_back(created);
  return *created;
}

void Engine::arrive(Call& call, const Group& group) {
  if (failed()) throw SimulationAborted{};
  GroupState& state = state_of(group, call);
  const std::int32_t group_rank = state.group_rank_of[static_cast<std::size_t>(call.world_rank)];
  if (group_rank < 0) {
    fail_here(call_site(state, call) + ": world rank " + std::to_string(call.world_rank) +
              " (its call #" + std::to_string(call.call_number) + ") is not a member");
  }
  INFONCE_ASSERT(state.calls[static_cast<std::size_t>(group_rank)] == nullptr);
  call.group_rank = group_rank;
  state.calls[static_cast<std::size_t>(group_rank)] = &call;
  ++state.arrived;
  RankState& rank = ranks_[static_cast<std::size_t>(call.world_rank)];
  rank.calls = call.call_number + 1;
  rank.group = &state;
  rank.op_index = state.op_index;
  rank.signature = call.signature;

  if (state.arrived == state.group.size()) {
    complete(state);
    return;
  }
  call.waiter = boost::fibers::context::active();
  rank.status = Status::waiting;
  ++waiting_;
  // Only ranks wake ranks: with none left running, nothing ever will.
  if (waiting_ == live_) fail_here(deadlock_message());
  call.waiter->suspend();
  // Resumed by complete() (outcome set) or by fail() (not).
  if (call.outcome == nullptr) throw SimulationAborted{};
}

void Engine::complete(GroupState& state) {
  if (auto problem = find_disagreement(state)) fail_here(std::move(*problem));
  const std::shared_ptr<const Outcome> outcome = compute(state);
  boost::fibers::context* self = boost::fibers::context::active();
  // Wake in group-rank order, so FIFO resumes members in that order.
  for (Call*& call : state.calls) {
    call->outcome = outcome;
    if (call->waiter != nullptr) {
      ranks_[static_cast<std::size_t>(call->world_rank)].status = Status::running;
      --waiting_;
      self->schedule(std::exchange(call->waiter, nullptr));
    }
    call = nullptr;
  }
  state.arrived = 0;
  ++state.op_index;
}

std::optional<std::string> Engine::find_disagreement(const GroupState& state) const {
  const Call& first = *state.calls[0];
  const bool agree = std::ranges::all_of(
      state.calls, [&first](const Call* call) { return compatible(first, *call); });
  // Messages are built only on failure: this runs for every collective.
  const auto site = [&state] {
    return "collective #" + std::to_string(state.op_index) + " on " + format_group(state.group) +
           ": ";
  };
  if (!agree) {
    // Group members by what they called; the most common call first.
    std::vector<std::pair<std::string, std::vector<std::int32_t>>> calls;
    for (const Call* call : state.calls) {
      const std::string key = agreement_key(*call);
      auto same = std::ranges::find_if(calls, [&key](const auto& c) { return c.first == key; });
      if (same == calls.end()) {
        calls.emplace_back(key, std::vector<std::int32_t>{});
        same = std::prev(calls.end());
      }
      same->second.push_back(call->world_rank);
    }
    std::ranges::stable_sort(
        calls, [](const auto& a, const auto& b) { return a.second.size() > b.second.size(); });
    std::string text = site() + "members call different collectives: ";
    for (std::size_t i = 0; i < calls.size(); ++i) {
      const auto& [key, ranks] = calls[i];
      text += (i > 0 ? "; " : "") + world_ranks_text(ranks) + " call" +
              (ranks.size() == 1 ? "s " : " ") + key;
      if (ranks.size() == 1) {
        const std::int32_t gr = state.group_rank_of[static_cast<std::size_t>(ranks[0])];
        text += " (its call #" +
                std::to_string(state.calls[static_cast<std::size_t>(gr)]->call_number) + ")";
      }
    }
    return text;
  }
  const auto members = static_cast<std::int64_t>(state.calls.size());
  const Signature& s = first.signature;
  if (takes_counts(s.kind)) {
    if (auto problem = counts_problem(state)) return site() + *problem;
  }
  if (s.kind == CollectiveKind::broadcast && (s.root < 0 || s.root >= members)) {
    return site() + describe(s) + ": root " + std::to_string(s.root) + " is not a group rank (" +
           std::to_string(members) + " members)";
  }
  return std::nullopt;
}

std::shared_ptr<const Outcome> Engine::compute(const GroupState& state) {
  auto outcome = std::make_shared<Outcome>();
  const Signature& s = state.calls[0]->signature;
  switch (s.kind) {
    case CollectiveKind::all_gather:
    case CollectiveKind::all_gather_v:
      outcome->values = by_element(
          s.element, [&state]<class T>(T) -> Outcome::Values { return concatenate<T>(state); });
      break;
    case CollectiveKind::all_gather_object:
      outcome->values = concatenate<std::byte>(state);
      outcome->offsets.push_back(0);
      for (const Call* call : state.calls) {
        outcome->offsets.push_back(outcome->offsets.back() + call->signature.count);
      }
      break;
    case CollectiveKind::all_reduce: {
      const std::vector<std::int32_t> order = summation_order(state, options_.reduction_order_seed);
      if (s.element == ElementType::f64) {
        outcome->values = reduce<double>(state, order, s.op);
      } else {
        INFONCE_ASSERT(s.element == ElementType::f32);
        outcome->values = reduce<float>(state, order, s.op);
      }
      break;
    }
    case CollectiveKind::reduce_scatter_v: {
      // Every shard reduced at once (element-wise, so the same bits as one
      // reduction per shard); member i then takes [offsets[i], offsets[i+1]).
      const std::vector<std::int32_t> order = summation_order(state, options_.reduction_order_seed);
      if (s.element == ElementType::f64) {
        outcome->values = reduce<double>(state, order, ReduceOp::sum);
      } else {
        INFONCE_ASSERT(s.element == ElementType::f32);
        outcome->values = reduce<float>(state, order, ReduceOp::sum);
      }
      outcome->offsets.push_back(0);
      for (const std::int64_t count : state.calls[0]->counts) {
        outcome->offsets.push_back(outcome->offsets.back() + count);
      }
      break;
    }
    case CollectiveKind::broadcast:
      outcome->values = by_element(
          s.element, [&state]<class T>(T) -> Outcome::Values { return copy_of_root<T>(state); });
      break;
    case CollectiveKind::barrier:
      break;
    case CollectiveKind::split: {
      // Members with a color >= 0, ordered by (color, key, world rank).
      std::vector<std::tuple<std::int32_t, std::int32_t, std::int32_t>> order;
      for (const Call* call : state.calls) {
        if (call->color >= 0) order.emplace_back(call->color, call->key, call->world_rank);
      }
      std::ranges::sort(order);
      std::vector<std::int32_t> group_of_world(static_cast<std::size_t>(world_size()), -1);
      for (std::size_t i = 0; i < order.size(); ++i) {
        const auto [color, key, w] = order[i];
        if (i == 0 || color != std::get<0>(order[i - 1])) {
          if (next_split_id_ >= kDpGroupIdBase) fail_here("split: too many groups");
          outcome->groups.push_back(Group{next_split_id_++, {}});
        }
        outcome->groups.back().world_ranks.push_back(w);
        group_of_world[static_cast<std::size_t>(w)] =
            static_cast<std::int32_t>(outcome->groups.size()) - 1;
      }
      for (const Call* call : state.calls) {
        outcome->group_of_member.push_back(
            group_of_world[static_cast<std::size_t>(call->world_rank)]);
      }
      break;
    }
  }
  return outcome;
}

std::string Engine::where_is(std::int32_t rank) const {
  const RankState& r = ranks_[static_cast<std::size_t>(rank)];
  const std::string who = "world rank " + std::to_string(rank);
  switch (r.status) {
    case Status::returned:
      return who + " returned after " + counted(r.calls, "collective call");
    case Status::threw:
      return who + " threw";
    case Status::running:
      return who + " is running";
    case Status::waiting:
      if (!r.receiving.empty()) return who + " waits in " + r.receiving;
      return who + " waits in collective #" + std::to_string(r.op_index) + " " +
             describe(r.signature) + " on " + format_group(r.group->group) + " (its call #" +
             std::to_string(r.calls - 1) + ")";
  }
  return who;
}

std::string Engine::deadlock_message() const {
  constexpr std::size_t kGroupsShown = 4;
  constexpr std::size_t kRanksShown = 6;
  const bool receiving =
      std::ranges::any_of(ranks_, [](const RankState& r) { return !r.receiving.empty(); });
  std::string text = std::string("deadlock: every live rank waits in a collective ") +
                     (receiving ? "or a recv " : "") + "that cannot complete";
  std::vector<std::int32_t> returned;
  std::string crossed;  // the first rank that went to another group at the same step
  std::size_t shown = 0;
  std::size_t hidden = 0;
  for (const auto& [group, state] : groups_) {
    if (state->arrived == 0) continue;
    std::vector<std::int32_t> present;
    std::vector<std::int32_t> missing;
    const Call* example = nullptr;
    for (std::size_t i = 0; i < state->calls.size(); ++i) {
      const std::int32_t w = state->group.world_ranks[i];
      if (state->calls[i] == nullptr) {
        missing.push_back(w);
        continue;
      }
      present.push_back(w);
      if (example == nullptr) example = state->calls[i];
    }
    for (const std::int32_t w : missing) {
      const RankState& r = ranks_[static_cast<std::size_t>(w)];
      if (r.status == Status::returned) returned.push_back(w);
      if (crossed.empty() && r.status == Status::waiting && r.calls - 1 == example->call_number &&
          r.group != state.get()) {
        crossed = "world rank " + std::to_string(w) + " made its call #" +
                  std::to_string(example->call_number) + " on " + format_group(r.group->group) +
                  " where " + world_ranks_text(present) + " made it on " +
                  format_group(state->group);
      }
    }
    if (shown == kGroupsShown) {
      ++hidden;
      continue;
    }
    ++shown;
    text += "; " + call_site(*state, *example) + " has " + world_ranks_text(present) +
            at_call_text(*state) + " and waits for " + world_ranks_text(missing);
  }
  if (hidden > 0) text += "; +" + std::to_string(hidden) + " more waiting collectives";
  text += receive_deadlock_text();
  if (!crossed.empty()) text += "; different groups at the same step: " + crossed;
  std::ranges::sort(returned);
  // std::unique, not std::ranges::unique: clang 14 cannot instantiate the
  // latter's subrange result with libstdc++ 12.
  returned.erase(std::unique(returned.begin(), returned.end()), returned.end());
  for (std::size_t i = 0; i < returned.size() && i < kRanksShown; ++i) {
    text += "; " + where_is(returned[i]);
  }
  if (returned.size() > kRanksShown) {
    text += "; +" + std::to_string(returned.size() - kRanksShown) + " more returned ranks";
  }
  return text;
}

void Engine::fail(std::string message, std::exception_ptr cause) {
  if (!failure_) failure_ = Failure{std::move(message), std::move(cause)};
  boost::fibers::context* self = boost::fibers::context::active();
  for (auto& [group, state] : groups_) {
    for (Call*& call : state->calls) {
      if (call == nullptr) continue;
      // A woken rank finds no outcome and throws SimulationAborted.
      boost::fibers::context* waiter = std::exchange(call->waiter, nullptr);
      if (waiter != nullptr && waiter != self) self->schedule(waiter);
      call = nullptr;
    }
    state->arrived = 0;
  }
  for (auto& [key, channel] : channels_) {
    if (channel.receiver == nullptr) continue;
    boost::fibers::context* waiter = std::exchange(channel.receiver->waiter, nullptr);
    if (waiter != nullptr && waiter != self) self->schedule(waiter);
    channel.receiver = nullptr;
  }
  for (RankState& rank : ranks_) {
    if (rank.status == Status::waiting) rank.status = Status::running;
    rank.receiving.clear();
  }
  waiting_ = 0;
}

void Engine::fail_here(std::string message) {
  fail(std::move(message));
  throw SimulationAborted{};
}

void Engine::rank_finished(std::int32_t rank, std::exception_ptr error) {
  RankState& state = ranks_[static_cast<std::size_t>(rank)];
  if (error != nullptr) {
    state.status = Status::threw;
    std::string text = "world rank " + std::to_string(rank) + " threw " + exception_text(error);
    if (state.calls == 0) {
      text += " before any collective call";
    } else {
      text += " after " + counted(state.calls, "collective call") + " (the last: collective #" +
              std::to_string(state.op_index) + " " + describe(state.signature) + " on " +
              format_group(state.group->group) + ")";
    }
    fail(std::move(text), std::move(error));
  } else {
    state.status = Status::returned;
  }
  --live_;
  if (live_ == 0) {
    if (main_waiter_ != nullptr) {
      boost::fibers::context::active()->schedule(std::exchange(main_waiter_, nullptr));
    }
    return;
  }
  if (!failed() && waiting_ == live_) fail(deadlock_message());
}

void Engine::abandon_unstarted(std::int32_t started, const std::string& error) {
  for (std::int32_t rank = started; rank < world_size(); ++rank) {
    ranks_[static_cast<std::size_t>(rank)].status = Status::returned;
  }
  live_ = started;
  fail(error);
}

void Engine::wait_for_ranks() {
  if (live_ == 0) return;
  main_waiter_ = boost::fibers::context::active();
  main_waiter_->suspend();
  INFONCE_ASSERT(live_ == 0);
}

void Engine::throw_if_failed() const {
  if (!failure_) return;
  if (failure_->cause != nullptr) {
    try {
      std::rethrow_exception(failure_->cause);
    } catch (...) {
      // The rank's own exception stays reachable (std::rethrow_if_nested).
      std::throw_with_nested(SimulationError(failure_->message));
    }
  }
  throw SimulationError(failure_->message);
}

}  // namespace infonce::sim::detail
