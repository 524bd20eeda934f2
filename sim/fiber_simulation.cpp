#include "sim/fiber_simulation.hpp"

#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

#include <boost/context/detail/exception.hpp>
#include <boost/fiber/fiber.hpp>
#include <boost/fiber/operations.hpp>

#include "base/assert.hpp"
#include "base/error.hpp"
#include "sim/collective_engine.hpp"
#include "sim/fiber_scheduler.hpp"
#include "sim/mesh.hpp"
#include "sim/stack_pool.hpp"

namespace infonce::sim {

namespace {

using detail::Call;
using detail::CollectiveKind;
using detail::element_type_of;
using detail::ElementType;

constexpr std::int32_t kMaxWorld = 65536;
constexpr std::size_t kMinStackBytes = 16 * 1024;
constexpr std::size_t kMaxStackBytes = 64 * 1024 * 1024;

bool has_agreed_size(CollectiveKind kind) {
  return kind == CollectiveKind::all_gather || kind == CollectiveKind::all_gather_v ||
         kind == CollectiveKind::all_reduce || kind == CollectiveKind::reduce_scatter_v ||
         kind == CollectiveKind::broadcast;
}

Group reversed(Group group) {
  std::ranges::reverse(group.world_ranks);
  return group;
}

// Storage a faulty call may need for the duration of the call.
struct Detour {
  std::optional<Group> group;      // wrong_group: the group called instead
  detail::Outcome::Values padded;  // wrong_size: the values plus one
};

template <class T>
void pad(Call& call, Detour& detour) {
  auto& padded =
      detour.padded.emplace<std::vector<T>>(static_cast<std::size_t>(call.signature.count) + 1);
  if (call.signature.count > 0) {
    std::memcpy(padded.data(), call.data,
                static_cast<std::size_t>(call.signature.count) * sizeof(T));
  }
  call.data = padded.data();
  ++call.signature.count;
}

// One rank's view of the simulated world.
class FiberCommunicator final : public Communicator {
 public:
  FiberCommunicator(detail::Engine& engine, std::int32_t rank) : engine_(engine), rank_(rank) {}

  std::int32_t world_rank() const override { return rank_; }
  std::int32_t world_size() const override { return engine_.world_size(); }
  Group world() const override { return engine_.world_group(); }

  Group split(std::int32_t color, std::int32_t key) override {
    Call call = begin(CollectiveKind::split, ElementType::none, 0);
    call.color = color;
    call.key = key;
    const Group world_group = world();
    Detour detour;
    engine_.arrive(call, apply_fault(call, world_group, detour));
    const detail::Outcome& outcome = *call.outcome;
    const std::int32_t index = outcome.group_of_member[static_cast<std::size_t>(call.group_rank)];
    return index < 0 ? Group{-1, {}} : outcome.groups[static_cast<std::size_t>(index)];
  }

  std::vector<double> all_gather(const Group& group, std::span<const double> mine) override {
    return gather(CollectiveKind::all_gather, group, mine, {});
  }
  std::vector<float> all_gather(const Group& group, std::span<const float> mine) override {
    return gather(CollectiveKind::all_gather, group, mine, {});
  }
  std::vector<std::int64_t> all_gather(const Group& group,
                                       std::span<const std::int64_t> mine) override {
    return gather(CollectiveKind::all_gather, group, mine, {});
  }

  std::vector<double> all_gather_v(const Group& group, std::span<const double> mine,
                                   std::span<const std::int64_t> counts) override {
    return gather(CollectiveKind::all_gather_v, group, mine, counts);
  }
  std::vector<float> all_gather_v(const Group& group, std::span<const float> mine,
                                  std::span<const std::int64_t> counts) override {
    return gather(CollectiveKind::all_gather_v, group, mine, counts);
  }
  std::vector<std::int64_t> all_gather_v(const Group& group, std::span<const std::int64_t> mine,
                                         std::span<const std::int64_t> counts) override {
    return gather(CollectiveKind::all_gather_v, group, mine, counts);
  }

  // Every member's result is a view of the one outcome: no copies.
  GatheredObjects all_gather_object(const Group& group, std::span<const std::byte> mine) override {
    Call call = begin(CollectiveKind::all_gather_object, ElementType::byte, std::ssize(mine));
    call.data = mine.data();
    Detour detour;
    engine_.arrive(call, apply_fault(call, group, detour));
    const detail::Outcome& outcome = *call.outcome;
    return {call.outcome, std::get<std::vector<std::byte>>(outcome.values), outcome.offsets};
  }

  std::vector<double> reduce_scatter_v(const Group& group, std::span<const double> values,
                                       std::span<const std::int64_t> counts) override {
    return scatter(group, values, counts);
  }
  std::vector<float> reduce_scatter_v(const Group& group, std::span<const float> values,
                                      std::span<const std::int64_t> counts) override {
    return scatter(group, values, counts);
  }

  void all_reduce(const Group& group, std::span<double> values, ReduceOp op) override {
    reduce(group, values, op);
  }
  void all_reduce(const Group& group, std::span<float> values, ReduceOp op) override {
    reduce(group, values, op);
  }

  void broadcast(const Group& group, std::span<double> values, std::int32_t root) override {
    broadcast_values(group, values, root);
  }
  void broadcast(const Group& group, std::span<std::byte> values, std::int32_t root) override {
    broadcast_values(group, values, root);
  }

  void barrier(const Group& group) override {
    Call call = begin(CollectiveKind::barrier, ElementType::none, 0);
    Detour detour;
    engine_.arrive(call, apply_fault(call, group, detour));
  }

  void send(const Group& group, std::int32_t peer, std::span<const double> values) override {
    send_values(group, peer, values);
  }
  void send(const Group& group, std::int32_t peer, std::span<const float> values) override {
    send_values(group, peer, values);
  }
  void recv(const Group& group, std::int32_t peer, std::span<double> out) override {
    receive_values(group, peer, out);
  }
  void recv(const Group& group, std::int32_t peer, std::span<float> out) override {
    receive_values(group, peer, out);
  }

 private:
  // Counts the call, applies the fault planned for it, and under a random
  // schedule first yields: one more point where the interleaving can change.
  Call begin(CollectiveKind kind, ElementType element, std::int64_t count) {
    if (engine_.failed()) throw detail::SimulationAborted{};
    if (engine_.yields_at_calls()) {
      boost::this_fiber::yield();
      if (engine_.failed()) throw detail::SimulationAborted{};
    }
    Call call;
    call.signature.kind = kind;
    call.signature.element = element;
    call.signature.count = count;
    call.world_rank = rank_;
    call.call_number = calls_++;
    fault_ = engine_.fault_for(rank_, call.call_number);
    if (fault_ == FaultInjection::Kind::early_return) throw detail::InjectedEarlyReturn{};
    if (fault_ == FaultInjection::Kind::throw_error) {
      throw std::runtime_error("injected fault: world rank " + std::to_string(rank_) +
                               " throws at its collective call #" +
                               std::to_string(call.call_number));
    }
    return call;
  }

  // The group the call really goes to, after the planned fault (if any) has
  // changed the call. Faults that need a second member to disagree with are
  // skipped on single-member groups.
  const Group& apply_fault(Call& call, const Group& group, Detour& detour) const {
    using Kind = FaultInjection::Kind;
    const bool partnered = group.size() >= 2;
    switch (fault_) {
      case Kind::wrong_group:
        // The same members in reverse order: a group nobody else calls.
        if (partnered) return detour.group.emplace(reversed(group));
        if (world_size() >= 2) return detour.group.emplace(reversed(world()));
        return group;
      case Kind::wrong_collective:
        if (!partnered) return group;
        if (call.signature.kind == CollectiveKind::barrier) {
          call.signature = {CollectiveKind::all_gather_object, ElementType::byte, 0, ReduceOp::sum,
                            0};
        } else {
          call.signature = {CollectiveKind::barrier, ElementType::none, 0, ReduceOp::sum, 0};
        }
        call.data = nullptr;
        call.counts = {};
        return group;
      case Kind::wrong_size:
        if (!partnered || !has_agreed_size(call.signature.kind)) return group;
        switch (call.signature.element) {
          case ElementType::f64:
            pad<double>(call, detour);
            break;
          case ElementType::f32:
            pad<float>(call, detour);
            break;
          case ElementType::i64:
            pad<std::int64_t>(call, detour);
            break;
          case ElementType::byte:
            pad<std::byte>(call, detour);
            break;
          case ElementType::none:
            break;
        }
        return group;
      case Kind::none:
      case Kind::early_return:
      case Kind::throw_error:
      case Kind::drop_message:  // sends only (send_values)
        return group;
    }
    return group;
  }

  template <class T>
  std::vector<T> gather(CollectiveKind kind, const Group& group, std::span<const T> mine,
                        std::span<const std::int64_t> counts) {
    Call call = begin(kind, element_type_of<T>(), std::ssize(mine));
    call.data = mine.data();
    call.counts = counts;
    Detour detour;
    engine_.arrive(call, apply_fault(call, group, detour));
    return std::get<std::vector<T>>(call.outcome->values);
  }

  // The outcome holds every shard reduced; this member's is at its group rank.
  template <class T>
  std::vector<T> scatter(const Group& group, std::span<const T> values,
                         std::span<const std::int64_t> counts) {
    Call call = begin(CollectiveKind::reduce_scatter_v, element_type_of<T>(), std::ssize(values));
    call.data = values.data();
    call.counts = counts;
    Detour detour;
    engine_.arrive(call, apply_fault(call, group, detour));
    const detail::Outcome& outcome = *call.outcome;
    const auto& reduced = std::get<std::vector<T>>(outcome.values);
    const auto me = static_cast<std::size_t>(call.group_rank);
    return {reduced.begin() + outcome.offsets[me], reduced.begin() + outcome.offsets[me + 1]};
  }

  template <class T>
  void reduce(const Group& group, std::span<T> values, ReduceOp op) {
    Call call = begin(CollectiveKind::all_reduce, element_type_of<T>(), std::ssize(values));
    call.signature.op = op;
    call.data = values.data();
    Detour detour;
    engine_.arrive(call, apply_fault(call, group, detour));
    copy_result<T>(call, values);
  }

  template <class T>
  void broadcast_values(const Group& group, std::span<T> values, std::int32_t root) {
    Call call = begin(CollectiveKind::broadcast, element_type_of<T>(), std::ssize(values));
    call.signature.root = root;
    call.data = values.data();
    Detour detour;
    engine_.arrive(call, apply_fault(call, group, detour));
    copy_result<T>(call, values);
  }

  // A message owns a copy of the values: the sender may reuse its buffer at once.
  template <class T>
  void send_values(const Group& group, std::int32_t peer, std::span<const T> values) {
    Call call = begin(CollectiveKind::barrier, element_type_of<T>(), std::ssize(values));
    detail::Message message{element_type_of<T>(), std::ssize(values), {}, call.call_number};
    message.bytes.resize(values.size_bytes());
    if (!values.empty()) std::memcpy(message.bytes.data(), values.data(), values.size_bytes());
    const Group* target = &group;
    std::optional<Group> detour;
    switch (fault_) {
      case FaultInjection::Kind::drop_message:
        return;
      case FaultInjection::Kind::wrong_size:
        message.bytes.resize(message.bytes.size() + sizeof(T));
        ++message.count;
        break;
      case FaultInjection::Kind::wrong_group:
        if (group.size() >= 2) target = &detour.emplace(reversed(group));
        break;
      default:
        break;
    }
    engine_.send(*target, rank_, peer, std::move(message));
    const std::int32_t to = peer >= 0 && peer < target->size()
                                ? target->world_ranks[static_cast<std::size_t>(peer)]
                                : -1;
    if (to >= 0) count_sent(to);
  }

  template <class T>
  void receive_values(const Group& group, std::int32_t peer, std::span<T> out) {
    Call call = begin(CollectiveKind::barrier, element_type_of<T>(), std::ssize(out));
    detail::Receive receive{element_type_of<T>(), std::ssize(out),
                            reinterpret_cast<std::byte*>(out.data()), rank_, call.call_number};
    engine_.receive(group, peer, receive);
    count_received(group.world_ranks[static_cast<std::size_t>(peer)]);
  }

  template <class T>
  static void copy_result(const Call& call, std::span<T> values) {
    const auto& result = std::get<std::vector<T>>(call.outcome->values);
    INFONCE_ASSERT(result.size() == values.size());
    std::ranges::copy(result, values.begin());
  }

  detail::Engine& engine_;
  std::int32_t rank_;
  std::int64_t calls_ = 0;
  FaultInjection::Kind fault_ = FaultInjection::Kind::none;
};

void validate(const SimulationOptions& options) {
  if (options.world_size < 1 || options.world_size > kMaxWorld) {
    throw InputError("simulation: world_size must be in 1.." + std::to_string(kMaxWorld) +
                     ", got " + std::to_string(options.world_size));
  }
  if (options.fiber_stack_bytes < kMinStackBytes || options.fiber_stack_bytes > kMaxStackBytes) {
    throw InputError("simulation: fiber_stack_bytes must be in " + std::to_string(kMinStackBytes) +
                     ".." + std::to_string(kMaxStackBytes) + ", got " +
                     std::to_string(options.fiber_stack_bytes));
  }
  const FaultInjection& fault = options.fault;
  if (fault.kind == FaultInjection::Kind::none) return;
  if (fault.rank < 0 || fault.rank >= options.world_size) {
    throw InputError("simulation: fault.rank must be a world rank, got " +
                     std::to_string(fault.rank));
  }
  if (fault.at_collective < 0) {
    throw InputError("simulation: fault.at_collective must be >= 0, got " +
                     std::to_string(fault.at_collective));
  }
}

// SimulationAborted and the early_return fault end a program quietly; any
// other exception is the rank's failure.
std::exception_ptr failure_of(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const detail::SimulationAborted&) {
    return nullptr;
  } catch (const detail::InjectedEarlyReturn&) {
    return nullptr;
  } catch (...) {
    return std::current_exception();
  }
}

void run_rank(detail::Engine& engine, const RankProgram& program, std::int32_t rank) {
  std::exception_ptr failure;
  {
    FiberCommunicator comm(engine, rank);
    try {
      program(comm);
    } catch (const boost::context::detail::forced_unwind&) {
      throw;  // Boost.Context's own unwinding of a destroyed fiber
    } catch (...) {
      failure = failure_of(std::current_exception());
    }
  }
  engine.rank_finished(rank, std::move(failure));
}

void start_ranks(detail::Engine& engine, const RankProgram& program,
                 const std::shared_ptr<detail::StackPool>& pool, std::size_t stack_bytes) {
  for (std::int32_t rank = 0; rank < engine.world_size(); ++rank) {
    try {
      // launch::post: the fiber is queued, and runs once the main context waits.
      boost::fibers::fiber fiber(std::allocator_arg,
                                 detail::PooledStackAllocator(pool, stack_bytes),
                                 [&engine, &program, rank] { run_rank(engine, program, rank); });
      fiber.detach();
    } catch (const std::exception& e) {
      engine.abandon_unstarted(
          rank, "could not start world rank " + std::to_string(rank) + ": " + e.what());
      return;
    }
  }
}

thread_local bool simulation_running = false;

class RunScope {
 public:
  RunScope(detail::SeededScheduler& scheduler, const Schedule& schedule,
           const detail::StackPool& pool)
      : scheduler_(scheduler) {
    simulation_running = true;
    scheduler_.begin_run(schedule, pool);
  }
  ~RunScope() {
    scheduler_.end_run();
    simulation_running = false;
  }
  RunScope(const RunScope&) = delete;
  RunScope& operator=(const RunScope&) = delete;

 private:
  detail::SeededScheduler& scheduler_;
};

}  // namespace

void run_fibers(const SimulationOptions& options, const RankProgram& program) {
  validate(options);
  if (simulation_running) {
    throw SimulationError(
        "run_fibers: called from inside a simulated rank; simulations do not nest");
  }
  detail::SeededScheduler& scheduler = detail::thread_scheduler();
  // Anything else ready on this thread would take part in the interleaving.
  INFONCE_ASSERT(scheduler.holds_only_dispatcher());
  const std::shared_ptr<detail::StackPool>& pool = detail::thread_stack_pool();
  detail::Engine engine(options);
  {
    RunScope scope(scheduler, options.schedule, *pool);
    start_ranks(engine, program, pool, options.fiber_stack_bytes);
    engine.wait_for_ranks();
    engine.fail_on_undelivered();
    // Lets Boost's dispatcher release the finished fibers, and so their stacks.
    boost::this_fiber::yield();
  }
  INFONCE_ASSERT(pool->outstanding() == 0);
  engine.throw_if_failed();
}

}  // namespace infonce::sim
