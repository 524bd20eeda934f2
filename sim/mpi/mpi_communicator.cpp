#include "sim/mpi/mpi_communicator.hpp"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>
#include <deque>
#include <exception>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <utility>

#include <mpi.h>

#include "base/assert.hpp"
#include "base/error.hpp"
#include "sim/collective_call.hpp"
#include "sim/determinism.hpp"
#include "sim/mesh.hpp"
#include "sim/mpi/mpi_runtime.hpp"
#include "sim/rank_format.hpp"

namespace infonce::sim {
namespace {

using detail::format_group;
using detail::format_ranks;

using Kind = detail::CollectiveKind;
using Element = detail::ElementType;
using detail::describe;
using detail::element_name;
using detail::format_counts;
using detail::kind_name;
using detail::Signature;
using detail::signatures_agree;
using detail::takes_counts;
using detail::world_ranks_text;

template <class T>
constexpr Element element_of() {
  return detail::element_type_of<T>();
}

template <class T>
MPI_Datatype mpi_type_of() {
  if constexpr (std::is_same_v<T, double>) return MPI_DOUBLE;
  if constexpr (std::is_same_v<T, float>) return MPI_FLOAT;
  if constexpr (std::is_same_v<T, std::int64_t>) return MPI_INT64_T;
  if constexpr (std::is_same_v<T, std::byte>) return MPI_BYTE;
}

// One member's call as the members exchange it before any data moves: what
// it must agree on with the others' calls, plus what error messages name.
struct CallRecord {
  std::int64_t kind = 0;
  std::int64_t element = 0;
  std::int64_t count = 0;
  std::int64_t op = 0;
  std::int64_t root = 0;
  std::int64_t call_number = 0;
  std::int64_t world_rank = 0;
  std::int64_t counts_size = 0;  // all_gather_v, reduce_scatter_v: counts.size()
  std::int64_t counts_hash = 0;  // all_gather_v, reduce_scatter_v: FNV-1a of counts
  std::int64_t color = 0;        // split
  std::int64_t key = 0;          // split
};
constexpr int kRecordWords = sizeof(CallRecord) / sizeof(std::int64_t);
static_assert(sizeof(CallRecord) == kRecordWords * sizeof(std::int64_t));

Kind kind_of(const CallRecord& r) {
  return static_cast<Kind>(r.kind);
}
Element element_of(const CallRecord& r) {
  return static_cast<Element>(r.element);
}

Signature signature_of(const CallRecord& r) {
  return {kind_of(r), element_of(r), r.count, static_cast<ReduceOp>(r.op),
          static_cast<std::int32_t>(r.root)};
}

std::string describe(const CallRecord& r) {
  return describe(signature_of(r));
}

std::int64_t hash_counts(std::span<const std::int64_t> counts) {
  std::uint64_t hash = kFnvOffsetBasis;
  for (const std::int64_t c : counts) hash = fnv1a64_u64(static_cast<std::uint64_t>(c), hash);
  return static_cast<std::int64_t>(hash);
}

// Whether two members' calls can form one collective (the simulator's rule;
// counts compared through their hash).
bool compatible(const CallRecord& a, const CallRecord& b) {
  return signatures_agree(signature_of(a), signature_of(b),
                          a.counts_size == b.counts_size && a.counts_hash == b.counts_hash);
}

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
    return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<std::size_t>(length));
}

// MPI_ERRORS_RETURN is set on every communicator: each return code is checked.
void check(int code, const char* call, const std::string& site) {
  if (code != MPI_SUCCESS) {
    throw SimulationError(site + ": " + call + " failed: " + mpi_error_text(code));
  }
}

int to_mpi_count(std::int64_t count, const std::string& site) {
  if (count < 0 || count > INT_MAX) {
    throw SimulationError(site + ": " + std::to_string(count) +
                          " elements do not fit an MPI count (int)");
  }
  return static_cast<int>(count);
}

// Receive counts and displacements of an all-gather-v in MPI's int.
struct Layout {
  std::vector<int> counts;
  std::vector<int> displacements;
  std::size_t total = 0;
};

Layout layout_of(std::span<const std::int64_t> counts, const std::string& site) {
  Layout layout;
  std::int64_t offset = 0;
  for (const std::int64_t c : counts) {
    layout.counts.push_back(to_mpi_count(c, site));
    layout.displacements.push_back(to_mpi_count(offset, site));
    offset += c;
  }
  to_mpi_count(offset, site);
  layout.total = static_cast<std::size_t>(offset);
  return layout;
}

// Waits for a nonblocking call, yielding the core (ranks may share cores), and
// gives up after `timeout_seconds` with SimulationError(stalled()).
template <class Stalled>
void wait_or_stall(MPI_Request& request, double timeout_seconds, const std::string& site,
                   Stalled&& stalled) {
  const double start = MPI_Wtime();
  for (std::int64_t polls = 0;; ++polls) {
    int done = 0;
    check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test", site);
    if (done != 0) return;
    const double waited = MPI_Wtime() - start;
    if (waited > timeout_seconds) throw SimulationError(stalled(waited));
    if (polls < 1000) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
}

}  // namespace

// A group's communicator and how many collectives it has had.
namespace {

struct GroupComm {
  Group group;
  MPI_Comm comm = MPI_COMM_NULL;
  bool owned = false;            // created here (freed here); the world dup is owned too
  std::int32_t group_rank = -1;  // this process's position in the group
  std::int64_t op_index = 0;     // collectives begun on the group
};

}  // namespace

struct MpiCommunicator::State {
  MpiOptions options;
  MPI_Comm world_comm = MPI_COMM_NULL;
  std::int32_t rank = 0;
  std::int32_t size = 0;
  std::int64_t calls = 0;
  std::int32_t next_split_id = 1;
  // By (id, members): the simulator's identity of a group. Never iterated
  // where order could reach a result.
  std::map<std::pair<std::int32_t, std::vector<std::int32_t>>, GroupComm> groups;

  // A collective begun: its communicator, every member's call, its site text.
  struct Started {
    GroupComm* group = nullptr;
    std::vector<CallRecord> records;
    std::string site;  // "collective #3 all_gather<double>(2 values) on group 1 {0,2}"
  };

  Started start(const Group& group, CallRecord mine, std::span<const std::int64_t> counts);
  GroupComm& comm_for(const Group& group, const CallRecord& mine);
  std::vector<CallRecord> exchange(const GroupComm& g, const CallRecord& mine,
                                   const std::string& site) const;
  void check_agreement(const GroupComm& g, const std::vector<CallRecord>& records,
                       std::span<const std::int64_t> counts) const;
  std::string disagreement(const GroupComm& g, const std::vector<CallRecord>& records,
                           std::span<const std::int64_t> counts) const;
  Group split(std::int32_t color, std::int32_t key);

  template <class T>
  std::vector<T> all_gather(Kind kind, const Group& group, std::span<const T> mine,
                            std::span<const std::int64_t> counts,
                            std::vector<std::int64_t>* member_sizes = nullptr);
  template <class T>
  void all_reduce(const Group& group, std::span<T> values, ReduceOp op);
  template <class T>
  std::vector<T> reduce_scatter(const Group& group, std::span<const T> values,
                                std::span<const std::int64_t> counts);
  template <class T>
  void broadcast(const Group& group, std::span<T> values, std::int32_t root);

  // Point-to-point (SPEC 16) on `message_comm`, a duplicate of the world:
  // each message is a header (its group, element type, count, the sender's
  // call number) and its values, sent with MPI_Isend (buffered: the send
  // returns at once) and kept until MPI completes it.
  struct PendingSend {
    MPI_Request request = MPI_REQUEST_NULL;
    std::vector<std::byte> buffer;
  };
  MPI_Comm message_comm = MPI_COMM_NULL;
  std::deque<PendingSend> pending_sends;

  // The peer's world rank, after checking the caller and the peer are two members.
  std::int32_t peer_world_rank(const Group& group, std::int32_t peer,
                               const std::string& site) const;
  void send_bytes(const Group& group, std::int32_t to, std::vector<std::byte> buffer,
                  const std::string& site);
  std::vector<std::byte> receive_bytes(const Group& group, std::int32_t from,
                                       const std::string& site);
  void reap_sends(bool wait);
  template <class T>
  std::int32_t send(const Group& group, std::int32_t peer, std::span<const T> values);
  template <class T>
  std::int32_t recv(const Group& group, std::int32_t peer, std::span<T> out);
};

namespace {

std::string group_site(std::int64_t op_index, const Group& group) {
  return "collective #" + std::to_string(op_index) + " on " + format_group(group);
}

}  // namespace

GroupComm& MpiCommunicator::State::comm_for(const Group& group, const CallRecord& mine) {
  auto found = groups.find({group.id, group.world_ranks});
  if (found != groups.end()) return found->second;

  const std::string site = describe(mine) + " on " + format_group(group);
  if (group.world_ranks.empty()) throw SimulationError(site + ": the group has no members");
  std::vector<bool> listed(static_cast<std::size_t>(size), false);
  for (const std::int32_t w : group.world_ranks) {
    if (w < 0 || w >= size) {
      throw SimulationError(site + ": world rank " + std::to_string(w) + " is outside 0.." +
                            std::to_string(size - 1));
    }
    if (listed[static_cast<std::size_t>(w)]) {
      throw SimulationError(site + ": world rank " + std::to_string(w) + " is listed twice");
    }
    listed[static_cast<std::size_t>(w)] = true;
  }
  const std::int32_t group_rank = group.rank_of(rank);
  if (group_rank < 0) {
    throw SimulationError(site + ": world rank " + std::to_string(rank) + " (its call #" +
                          std::to_string(mine.call_number) + ") is not a member");
  }

  // Only the members take part in MPI_Comm_create_group; the tag keeps
  // creations of different groups apart.
  MPI_Group world_group = MPI_GROUP_NULL;
  MPI_Group members = MPI_GROUP_NULL;
  MPI_Comm comm = MPI_COMM_NULL;
  check(MPI_Comm_group(world_comm, &world_group), "MPI_Comm_group", site);
  check(MPI_Group_incl(world_group, group.size(), group.world_ranks.data(), &members),
        "MPI_Group_incl", site);
  const int tag = static_cast<int>(static_cast<std::uint32_t>(group.id) % 32768U);
  const int created = MPI_Comm_create_group(world_comm, members, tag, &comm);
  MPI_Group_free(&members);
  MPI_Group_free(&world_group);
  check(created, "MPI_Comm_create_group", site);
  check(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler", site);
  int mpi_rank = -1;
  check(MPI_Comm_rank(comm, &mpi_rank), "MPI_Comm_rank", site);
  INFONCE_ASSERT(mpi_rank == group_rank);
  GroupComm& entry = groups[{group.id, group.world_ranks}];
  entry = GroupComm{group, comm, true, group_rank, 0};
  return entry;
}

std::vector<CallRecord> MpiCommunicator::State::exchange(const GroupComm& g, const CallRecord& mine,
                                                         const std::string& site) const {
  std::vector<CallRecord> records(static_cast<std::size_t>(g.group.size()));
  if (options.stall_timeout_seconds <= 0) {
    check(MPI_Allgather(&mine, kRecordWords, MPI_INT64_T, records.data(), kRecordWords, MPI_INT64_T,
                        g.comm),
          "MPI_Allgather", site);
    return records;
  }
  MPI_Request request = MPI_REQUEST_NULL;
  check(MPI_Iallgather(&mine, kRecordWords, MPI_INT64_T, records.data(), kRecordWords, MPI_INT64_T,
                       g.comm, &request),
        "MPI_Iallgather", site);
  wait_or_stall(request, options.stall_timeout_seconds, site, [&](double waited) {
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.1f", waited);
    return site + ": world rank " + std::to_string(rank) + " (its call #" +
           std::to_string(mine.call_number) + ") waited " + seconds +
           " s for the other members (one returned, called another collective or group, or "
           "failed without ending the job)";
  });
  return records;
}

std::string MpiCommunicator::State::disagreement(const GroupComm& g,
                                                 const std::vector<CallRecord>& records,
                                                 std::span<const std::int64_t> counts) const {
  // all_gather_v / reduce_scatter_v counts: every member's, to name them (the
  // records hold hashes).
  std::vector<std::vector<std::int64_t>> member_counts(records.size());
  const bool any_v =
      std::ranges::any_of(records, [](const CallRecord& r) { return takes_counts(kind_of(r)); });
  if (any_v) {
    const std::string site = group_site(g.op_index, g.group);
    std::vector<std::int64_t> sizes;
    for (const CallRecord& r : records)
      sizes.push_back(takes_counts(kind_of(r)) ? r.counts_size : 0);
    const Layout layout = layout_of(sizes, site);
    std::vector<std::int64_t> all(layout.total);
    const bool mine_v = takes_counts(kind_of(records[static_cast<std::size_t>(g.group_rank)]));
    check(MPI_Allgatherv(counts.data(), mine_v ? static_cast<int>(counts.size()) : 0, MPI_INT64_T,
                         all.data(), layout.counts.data(), layout.displacements.data(), MPI_INT64_T,
                         g.comm),
          "MPI_Allgatherv", site);
    for (std::size_t i = 0; i < records.size(); ++i) {
      const auto begin = all.begin() + layout.displacements[i];
      member_counts[i].assign(begin, begin + layout.counts[i]);
    }
  }
  const auto key_of = [&](std::size_t i) {
    const CallRecord& r = records[i];
    if (!takes_counts(kind_of(r))) return describe(r);
    return std::string(kind_name(kind_of(r))) + "<" + element_name(element_of(r)) + ">(counts " +
           format_counts(member_counts[i]) + ")";
  };
  // Members grouped by what they called, the most common call first.
  std::vector<std::pair<std::string, std::vector<std::int32_t>>> calls;
  std::vector<std::size_t> example;
  for (std::size_t i = 0; i < records.size(); ++i) {
    const std::string key = key_of(i);
    auto same = std::ranges::find_if(calls, [&key](const auto& c) { return c.first == key; });
    if (same == calls.end()) {
      calls.emplace_back(key, std::vector<std::int32_t>{});
      example.push_back(i);
      same = std::prev(calls.end());
    }
    same->second.push_back(static_cast<std::int32_t>(records[i].world_rank));
  }
  std::vector<std::size_t> order(calls.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::ranges::stable_sort(order, [&calls](std::size_t a, std::size_t b) {
    return calls[a].second.size() > calls[b].second.size();
  });
  std::string text = group_site(g.op_index, g.group) + ": members call different collectives: ";
  for (std::size_t n = 0; n < order.size(); ++n) {
    const auto& [key, ranks] = calls[order[n]];
    text += (n > 0 ? "; " : "") + world_ranks_text(ranks) + " call" +
            (ranks.size() == 1 ? "s " : " ") + key;
    if (ranks.size() == 1) {
      text += " (its call #" + std::to_string(records[example[order[n]]].call_number) + ")";
    }
  }
  return text;
}

void MpiCommunicator::State::check_agreement(const GroupComm& g,
                                             const std::vector<CallRecord>& records,
                                             std::span<const std::int64_t> counts) const {
  const CallRecord& first = records[0];
  const bool agree =
      std::ranges::all_of(records, [&first](const CallRecord& r) { return compatible(first, r); });
  if (!agree) throw SimulationError(disagreement(g, records, counts));
  const std::string site = group_site(g.op_index, g.group) + ": ";
  const auto members = static_cast<std::int64_t>(records.size());
  if (takes_counts(kind_of(first))) {
    // Every member's counts hash the same: checking one's own is checking all.
    std::vector<detail::MemberCall> calls;
    calls.reserve(records.size());
    for (const CallRecord& r : records) calls.push_back({r.world_rank, r.call_number, r.count});
    if (auto problem = detail::counts_problem(kind_of(first), counts, calls)) {
      throw SimulationError(site + *problem);
    }
  }
  if (kind_of(first) == Kind::broadcast && (first.root < 0 || first.root >= members)) {
    throw SimulationError(site + describe(first) + ": root " + std::to_string(first.root) +
                          " is not a group rank (" + std::to_string(members) + " members)");
  }
}

MpiCommunicator::State::Started MpiCommunicator::State::start(
    const Group& group, CallRecord mine, std::span<const std::int64_t> counts) {
  mine.call_number = calls++;
  mine.world_rank = rank;
  if (takes_counts(kind_of(mine))) {
    mine.counts_size = static_cast<std::int64_t>(counts.size());
    mine.counts_hash = hash_counts(counts);
  }
  GroupComm& g = comm_for(group, mine);
  Started started{&g,
                  {},
                  "collective #" + std::to_string(g.op_index) + " " + describe(mine) + " on " +
                      format_group(g.group)};
  started.records = exchange(g, mine, started.site);
  check_agreement(g, started.records, counts);
  ++g.op_index;
  return started;
}

template <class T>
std::vector<T> MpiCommunicator::State::all_gather(Kind kind, const Group& group,
                                                  std::span<const T> mine,
                                                  std::span<const std::int64_t> counts,
                                                  std::vector<std::int64_t>* member_sizes) {
  CallRecord call;
  call.kind = static_cast<std::int64_t>(kind);
  call.element = static_cast<std::int64_t>(element_of<T>());
  call.count = static_cast<std::int64_t>(mine.size());
  const Started s = start(group, call, counts);
  const int count = to_mpi_count(call.count, s.site);
  if (kind == Kind::all_gather) {
    std::vector<T> out(mine.size() * s.records.size());
    check(MPI_Allgather(mine.data(), count, mpi_type_of<T>(), out.data(), count, mpi_type_of<T>(),
                        s.group->comm),
          "MPI_Allgather", s.site);
    return out;
  }
  // all_gather_v: `counts` as agreed; all_gather_object: each member's own size.
  std::vector<std::int64_t> sizes;
  if (kind == Kind::all_gather_v) {
    sizes.assign(counts.begin(), counts.end());
  } else {
    for (const CallRecord& r : s.records) sizes.push_back(r.count);
  }
  const Layout layout = layout_of(sizes, s.site);
  if (member_sizes != nullptr) *member_sizes = sizes;
  std::vector<T> out(layout.total);
  check(MPI_Allgatherv(mine.data(), count, mpi_type_of<T>(), out.data(), layout.counts.data(),
                       layout.displacements.data(), mpi_type_of<T>(), s.group->comm),
        "MPI_Allgatherv", s.site);
  return out;
}

template <class T>
void MpiCommunicator::State::all_reduce(const Group& group, std::span<T> values, ReduceOp op) {
  CallRecord call;
  call.kind = static_cast<std::int64_t>(Kind::all_reduce);
  call.element = static_cast<std::int64_t>(element_of<T>());
  call.count = static_cast<std::int64_t>(values.size());
  call.op = static_cast<std::int64_t>(op);
  const Started s = start(group, call, {});
  const int count = to_mpi_count(call.count, s.site);
  const std::size_t members = s.records.size();
  if (options.reduction == MpiReduction::native) {
    check(
        MPI_Allreduce(MPI_IN_PLACE, values.data(), count, mpi_type_of<T>(), MPI_SUM, s.group->comm),
        "MPI_Allreduce", s.site);
  } else {
    // The simulator's order: member 0's values, then + member 1's, + member
    // 2's, ... element-wise in T (never MPI's unspecified order).
    std::vector<T> all(values.size() * members);
    check(MPI_Allgather(values.data(), count, mpi_type_of<T>(), all.data(), count, mpi_type_of<T>(),
                        s.group->comm),
          "MPI_Allgather", s.site);
    const std::size_t n = values.size();
    std::copy_n(all.begin(), n, values.begin());
    for (std::size_t k = 1; k < members; ++k) {
      const T* member = all.data() + k * n;
      for (std::size_t j = 0; j < n; ++j) values[j] += member[j];
    }
  }
  if (op == ReduceOp::mean) {
    const T divisor = static_cast<T>(members);
    for (T& value : values) value /= divisor;
  }
}

template <class T>
std::vector<T> MpiCommunicator::State::reduce_scatter(const Group& group, std::span<const T> values,
                                                      std::span<const std::int64_t> counts) {
  CallRecord call;
  call.kind = static_cast<std::int64_t>(Kind::reduce_scatter_v);
  call.element = static_cast<std::int64_t>(element_of<T>());
  call.count = static_cast<std::int64_t>(values.size());
  const Started s = start(group, call, counts);
  // Shard k is sent to member k; this member receives its shard from each.
  const Layout shards = layout_of(counts, s.site);
  const auto me = static_cast<std::size_t>(s.group->group_rank);
  const std::size_t n = static_cast<std::size_t>(counts[me]);
  const std::size_t members = s.records.size();
  std::vector<T> out(n);
  if (options.reduction == MpiReduction::native) {
    check(MPI_Reduce_scatter(values.data(), out.data(), shards.counts.data(), mpi_type_of<T>(),
                             MPI_SUM, s.group->comm),
          "MPI_Reduce_scatter", s.site);
    return out;
  }
  // The simulator's order: member 0's shard, then + member 1's, ... element-
  // wise in T (never MPI's unspecified order).
  to_mpi_count(static_cast<std::int64_t>(n * members), s.site);
  const std::vector<int> receive_counts(members, shards.counts[me]);
  std::vector<int> receive_offsets(members);
  for (std::size_t k = 0; k < members; ++k) receive_offsets[k] = static_cast<int>(k * n);
  std::vector<T> parts(n * members);
  check(MPI_Alltoallv(values.data(), shards.counts.data(), shards.displacements.data(),
                      mpi_type_of<T>(), parts.data(), receive_counts.data(), receive_offsets.data(),
                      mpi_type_of<T>(), s.group->comm),
        "MPI_Alltoallv", s.site);
  std::copy_n(parts.begin(), n, out.begin());
  for (std::size_t k = 1; k < members; ++k) {
    const T* part = parts.data() + k * n;
    for (std::size_t j = 0; j < n; ++j) out[j] += part[j];
  }
  return out;
}

template <class T>
void MpiCommunicator::State::broadcast(const Group& group, std::span<T> values, std::int32_t root) {
  CallRecord call;
  call.kind = static_cast<std::int64_t>(Kind::broadcast);
  call.element = static_cast<std::int64_t>(element_of<T>());
  call.count = static_cast<std::int64_t>(values.size());
  call.root = root;
  const Started s = start(group, call, {});
  check(MPI_Bcast(values.data(), to_mpi_count(call.count, s.site), mpi_type_of<T>(), root,
                  s.group->comm),
        "MPI_Bcast", s.site);
}

Group MpiCommunicator::State::split(std::int32_t color, std::int32_t key) {
  CallRecord call;
  call.kind = static_cast<std::int64_t>(Kind::split);
  call.color = color;
  call.key = key;
  const Group world = world_group_of(size);
  const Started s = start(world, call, {});

  // The simulator's numbering: members with color >= 0 ordered by (color,
  // key, world rank); ids 1, 2, ... by ascending color.
  std::vector<std::tuple<std::int64_t, std::int64_t, std::int32_t>> order;
  for (const CallRecord& r : s.records) {
    if (r.color >= 0) order.emplace_back(r.color, r.key, static_cast<std::int32_t>(r.world_rank));
  }
  std::ranges::sort(order);
  Group mine{-1, {}};
  for (std::size_t i = 0; i < order.size(); ++i) {
    const auto [c, k, w] = order[i];
    if (i == 0 || c != std::get<0>(order[i - 1])) {
      if (next_split_id >= kDpGroupIdBase) throw SimulationError(s.site + ": too many groups");
      ++next_split_id;
    }
    if (c == color) {
      mine.id = next_split_id - 1;
      mine.world_ranks.push_back(w);
    }
  }

  MPI_Comm comm = MPI_COMM_NULL;
  check(MPI_Comm_split(world_comm, color < 0 ? MPI_UNDEFINED : color, key, &comm), "MPI_Comm_split",
        s.site);
  if (color < 0) return Group{-1, {}};
  check(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler", s.site);
  int mpi_rank = -1;
  check(MPI_Comm_rank(comm, &mpi_rank), "MPI_Comm_rank", s.site);
  // MPI orders a split's members by (key, rank in world_comm): the same order.
  INFONCE_ASSERT(mpi_rank == mine.rank_of(rank));
  GroupComm& entry = groups[{mine.id, mine.world_ranks}];
  if (entry.comm != MPI_COMM_NULL) {
    MPI_Comm_free(&comm);  // the same group was used before under this id
  } else {
    entry = GroupComm{mine, comm, true, mpi_rank, 0};
  }
  return mine;
}

MpiCommunicator::MpiCommunicator(const MpiOptions& options) : state_(std::make_unique<State>()) {
  ensure_mpi_initialized();
  state_->options = options;
  const std::string site = "MpiCommunicator";
  check(MPI_Comm_dup(MPI_COMM_WORLD, &state_->world_comm), "MPI_Comm_dup", site);
  check(MPI_Comm_set_errhandler(state_->world_comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler",
        site);
  int rank = 0, size = 0;
  check(MPI_Comm_rank(state_->world_comm, &rank), "MPI_Comm_rank", site);
  check(MPI_Comm_size(state_->world_comm, &size), "MPI_Comm_size", site);
  state_->rank = rank;
  state_->size = size;
  check(MPI_Comm_dup(MPI_COMM_WORLD, &state_->message_comm), "MPI_Comm_dup", site);
  check(MPI_Comm_set_errhandler(state_->message_comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler",
        site);
  const Group world = world_group_of(size);
  // The world communicator is freed by hand below, not as a group entry.
  state_->groups[{world.id, world.world_ranks}] =
      GroupComm{world, state_->world_comm, false, rank, 0};
}

MpiCommunicator::~MpiCommunicator() {
  // While an exception unwinds, the job is about to be aborted and another
  // rank may never free its side: leave the communicators to MPI_Abort.
  if (std::uncaught_exceptions() > 0) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized != 0) return;
  for (auto& [key, group] : state_->groups) {
    if (group.owned && group.comm != MPI_COMM_NULL) MPI_Comm_free(&group.comm);
  }
  state_->reap_sends(false);
  for (State::PendingSend& pending : state_->pending_sends) {
    // Never received: MPI may still read the buffer after the request is
    // freed, so the buffer outlives this object on purpose.
    MPI_Request_free(&pending.request);
    new std::vector<std::byte>(std::move(pending.buffer));
  }
  MPI_Comm_free(&state_->message_comm);
  MPI_Comm_free(&state_->world_comm);
}

// ---- Point-to-point messages (SPEC 16) ----

namespace {

// What travels before a message's values.
struct MessageHeader {
  std::uint64_t group = 0;  // group_identity of the group it was sent on
  std::int64_t element = 0;
  std::int64_t count = 0;
  std::int64_t call_number = -1;  // the sender's
};

std::uint64_t group_identity(const Group& group) {
  std::uint64_t hash =
      fnv1a64_u64(static_cast<std::uint64_t>(static_cast<std::uint32_t>(group.id)));
  for (const std::int32_t w : group.world_ranks) {
    hash = fnv1a64_u64(static_cast<std::uint64_t>(static_cast<std::uint32_t>(w)), hash);
  }
  return hash;
}

// A tag per group keeps groups' channels apart (the header catches a collision).
int message_tag(const Group& group) {
  return static_cast<int>(group_identity(group) % 16384U);
}

std::string call_text(std::int32_t world_rank, std::int64_t call_number) {
  return "world rank " + std::to_string(world_rank) + " (its call #" + std::to_string(call_number) +
         ")";
}

}  // namespace

std::int32_t MpiCommunicator::State::peer_world_rank(const Group& group, std::int32_t peer,
                                                     const std::string& site) const {
  for (const std::int32_t w : group.world_ranks) {
    if (w < 0 || w >= size) {
      throw SimulationError(site + ": world rank " + std::to_string(w) + " is outside 0.." +
                            std::to_string(size - 1));
    }
  }
  const std::int32_t own = group.rank_of(rank);
  if (own < 0) {
    throw SimulationError(site + ": world rank " + std::to_string(rank) + " is not a member");
  }
  if (peer < 0 || peer >= group.size() || peer == own) {
    throw SimulationError(site + ": peer " + std::to_string(peer) +
                          " is not another group rank of " + format_group(group) +
                          " (the caller is group rank " + std::to_string(own) + ")");
  }
  return group.world_ranks[static_cast<std::size_t>(peer)];
}

// Completed sends leave the queue; with `wait`, every send is waited for.
void MpiCommunicator::State::reap_sends(bool wait) {
  while (!pending_sends.empty()) {
    int done = 0;
    PendingSend& front = pending_sends.front();
    if (wait) {
      check(MPI_Wait(&front.request, MPI_STATUS_IGNORE), "MPI_Wait", "send");
      done = 1;
    } else {
      check(MPI_Test(&front.request, &done, MPI_STATUS_IGNORE), "MPI_Test", "send");
    }
    if (done == 0) return;
    pending_sends.pop_front();
  }
}

void MpiCommunicator::State::send_bytes(const Group& group, std::int32_t to,
                                        std::vector<std::byte> buffer, const std::string& site) {
  PendingSend& pending = pending_sends.emplace_back();
  pending.buffer = std::move(buffer);
  check(MPI_Isend(pending.buffer.data(), to_mpi_count(std::ssize(pending.buffer), site), MPI_BYTE,
                  to, message_tag(group), message_comm, &pending.request),
        "MPI_Isend", site);
  reap_sends(false);
}

std::vector<std::byte> MpiCommunicator::State::receive_bytes(const Group& group, std::int32_t from,
                                                             const std::string& site) {
  MPI_Status status;
  const int tag = message_tag(group);
  if (options.stall_timeout_seconds <= 0) {
    check(MPI_Probe(from, tag, message_comm, &status), "MPI_Probe", site);
  } else {
    const double start = MPI_Wtime();
    for (std::int64_t polls = 0;; ++polls) {
      int found = 0;
      check(MPI_Iprobe(from, tag, message_comm, &found, &status), "MPI_Iprobe", site);
      if (found != 0) break;
      const double waited = MPI_Wtime() - start;
      if (waited > options.stall_timeout_seconds) {
        char seconds[32];
        std::snprintf(seconds, sizeof seconds, "%.1f", waited);
        throw SimulationError(site + ": waited " + seconds + " s for a message from world rank " +
                              std::to_string(from) + " (none was sent, or it went elsewhere)");
      }
      if (polls < 1000) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
    }
  }
  int bytes = 0;
  check(MPI_Get_count(&status, MPI_BYTE, &bytes), "MPI_Get_count", site);
  std::vector<std::byte> buffer(static_cast<std::size_t>(bytes));
  check(MPI_Recv(buffer.data(), bytes, MPI_BYTE, from, tag, message_comm, MPI_STATUS_IGNORE),
        "MPI_Recv", site);
  reap_sends(false);
  return buffer;
}

template <class T>
std::int32_t MpiCommunicator::State::send(const Group& group, std::int32_t peer,
                                          std::span<const T> values) {
  const std::int64_t call_number = calls++;
  const std::string site = detail::describe_message("send", element_of<T>(), std::ssize(values)) +
                           " by " + call_text(rank, call_number) + " on " + format_group(group);
  const std::int32_t to = peer_world_rank(group, peer, site);
  const MessageHeader header{group_identity(group), static_cast<std::int64_t>(element_of<T>()),
                             std::ssize(values), call_number};
  std::vector<std::byte> buffer(sizeof header + values.size_bytes());
  std::memcpy(buffer.data(), &header, sizeof header);
  if (!values.empty())
    std::memcpy(buffer.data() + sizeof header, values.data(), values.size_bytes());
  send_bytes(group, to, std::move(buffer), site);
  return to;
}

template <class T>
std::int32_t MpiCommunicator::State::recv(const Group& group, std::int32_t peer, std::span<T> out) {
  const std::int64_t call_number = calls++;
  const std::string site = detail::describe_message("recv", element_of<T>(), std::ssize(out)) +
                           " by " + call_text(rank, call_number) + " on " + format_group(group);
  const std::int32_t from = peer_world_rank(group, peer, site);
  const std::vector<std::byte> buffer = receive_bytes(group, from, site);
  MessageHeader header;
  if (buffer.size() < sizeof header) {
    throw SimulationError(site + ": a message of " + std::to_string(buffer.size()) +
                          " bytes has no header");
  }
  std::memcpy(&header, buffer.data(), sizeof header);
  const auto element = static_cast<Element>(header.element);
  const std::string pair =
      "message from " + call_text(from, header.call_number) + " to " + call_text(rank, call_number);
  if (header.group != group_identity(group)) {
    throw SimulationError(pair + ": it was sent on another group than " + format_group(group));
  }
  if (element != element_of<T>() || header.count != std::ssize(out) ||
      buffer.size() != sizeof header + out.size_bytes()) {
    throw SimulationError(pair + ": " + detail::describe_message("send", element, header.count) +
                          " met " +
                          detail::describe_message("recv", element_of<T>(), std::ssize(out)));
  }
  if (!out.empty()) std::memcpy(out.data(), buffer.data() + sizeof header, out.size_bytes());
  return from;
}

const MpiOptions& MpiCommunicator::options() const {
  return state_->options;
}
std::int64_t MpiCommunicator::calls() const {
  return state_->calls;
}
std::int32_t MpiCommunicator::world_rank() const {
  return state_->rank;
}
std::int32_t MpiCommunicator::world_size() const {
  return state_->size;
}
Group MpiCommunicator::world() const {
  return world_group_of(state_->size);
}

Group MpiCommunicator::split(std::int32_t color, std::int32_t key) {
  return state_->split(color, key);
}

std::vector<double> MpiCommunicator::all_gather(const Group& group, std::span<const double> mine) {
  return state_->all_gather(Kind::all_gather, group, mine, {});
}
std::vector<float> MpiCommunicator::all_gather(const Group& group, std::span<const float> mine) {
  return state_->all_gather(Kind::all_gather, group, mine, {});
}
std::vector<std::int64_t> MpiCommunicator::all_gather(const Group& group,
                                                      std::span<const std::int64_t> mine) {
  return state_->all_gather(Kind::all_gather, group, mine, {});
}

std::vector<double> MpiCommunicator::all_gather_v(const Group& group, std::span<const double> mine,
                                                  std::span<const std::int64_t> counts) {
  return state_->all_gather(Kind::all_gather_v, group, mine, counts);
}
std::vector<float> MpiCommunicator::all_gather_v(const Group& group, std::span<const float> mine,
                                                 std::span<const std::int64_t> counts) {
  return state_->all_gather(Kind::all_gather_v, group, mine, counts);
}
std::vector<std::int64_t> MpiCommunicator::all_gather_v(const Group& group,
                                                        std::span<const std::int64_t> mine,
                                                        std::span<const std::int64_t> counts) {
  return state_->all_gather(Kind::all_gather_v, group, mine, counts);
}

GatheredObjects MpiCommunicator::all_gather_object(const Group& group,
                                                   std::span<const std::byte> mine) {
  // The sizes travel in the call exchange; the bytes in one MPI_Allgatherv.
  std::vector<std::int64_t> sizes;
  std::vector<std::byte> bytes =
      state_->all_gather(Kind::all_gather_object, group, mine, {}, &sizes);
  std::vector<std::int64_t> offsets{0};
  for (const std::int64_t size : sizes) offsets.push_back(offsets.back() + size);
  return {std::move(bytes), std::move(offsets)};
}

std::vector<double> MpiCommunicator::reduce_scatter_v(const Group& group,
                                                      std::span<const double> values,
                                                      std::span<const std::int64_t> counts) {
  return state_->reduce_scatter(group, values, counts);
}
std::vector<float> MpiCommunicator::reduce_scatter_v(const Group& group,
                                                     std::span<const float> values,
                                                     std::span<const std::int64_t> counts) {
  return state_->reduce_scatter(group, values, counts);
}

void MpiCommunicator::all_reduce(const Group& group, std::span<double> values, ReduceOp op) {
  state_->all_reduce(group, values, op);
}
void MpiCommunicator::all_reduce(const Group& group, std::span<float> values, ReduceOp op) {
  state_->all_reduce(group, values, op);
}

void MpiCommunicator::broadcast(const Group& group, std::span<double> values, std::int32_t root) {
  state_->broadcast(group, values, root);
}
void MpiCommunicator::broadcast(const Group& group, std::span<std::byte> values,
                                std::int32_t root) {
  state_->broadcast(group, values, root);
}

void MpiCommunicator::barrier(const Group& group) {
  CallRecord call;
  call.kind = static_cast<std::int64_t>(Kind::barrier);
  const State::Started s = state_->start(group, call, {});
  check(MPI_Barrier(s.group->comm), "MPI_Barrier", s.site);
}

void MpiCommunicator::send(const Group& group, std::int32_t peer, std::span<const double> values) {
  count_sent(state_->send(group, peer, values));
}
void MpiCommunicator::send(const Group& group, std::int32_t peer, std::span<const float> values) {
  count_sent(state_->send(group, peer, values));
}
void MpiCommunicator::recv(const Group& group, std::int32_t peer, std::span<double> out) {
  count_received(state_->recv(group, peer, out));
}
void MpiCommunicator::recv(const Group& group, std::int32_t peer, std::span<float> out) {
  count_received(state_->recv(group, peer, out));
}

}  // namespace infonce::sim
