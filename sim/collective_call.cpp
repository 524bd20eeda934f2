#include "sim/collective_call.hpp"

#include "sim/rank_format.hpp"

namespace infonce::sim::detail {

const char* kind_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::split:
      return "split";
    case CollectiveKind::all_gather:
      return "all_gather";
    case CollectiveKind::all_gather_v:
      return "all_gather_v";
    case CollectiveKind::all_gather_object:
      return "all_gather_object";
    case CollectiveKind::all_reduce:
      return "all_reduce";
    case CollectiveKind::reduce_scatter_v:
      return "reduce_scatter_v";
    case CollectiveKind::broadcast:
      return "broadcast";
    case CollectiveKind::barrier:
      return "barrier";
  }
  return "?";
}

const char* element_name(ElementType element) {
  switch (element) {
    case ElementType::none:
      return "";
    case ElementType::f64:
      return "double";
    case ElementType::f32:
      return "float";
    case ElementType::i64:
      return "int64";
    case ElementType::byte:
      return "bytes";
  }
  return "?";
}

bool takes_counts(CollectiveKind kind) {
  return kind == CollectiveKind::all_gather_v || kind == CollectiveKind::reduce_scatter_v;
}

std::optional<std::string> counts_problem(CollectiveKind kind, std::span<const std::int64_t> counts,
                                          std::span<const MemberCall> members) {
  const std::string name = kind_name(kind);
  if (counts.size() != members.size()) {
    return name + ": counts has " + std::to_string(counts.size()) + " entries for " +
           std::to_string(members.size()) + " members";
  }
  std::int64_t total = 0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] < 0) {
      return name + ": counts[" + std::to_string(i) + "] = " + std::to_string(counts[i]) +
             " is negative";
    }
    total += counts[i];
  }
  const bool gathers = kind == CollectiveKind::all_gather_v;
  for (std::size_t i = 0; i < members.size(); ++i) {
    const MemberCall& member = members[i];
    // all_gather_v: member i gives its shard; reduce_scatter_v: every shard.
    const std::int64_t needed = gathers ? counts[i] : total;
    if (member.count == needed) continue;
    return name + ": world rank " + std::to_string(member.world_rank) + " (group rank " +
           std::to_string(i) + ", its call #" + std::to_string(member.call_number) + ") gives " +
           counted(member.count, "value") +
           (gathers ? " but counts[" + std::to_string(i) + "] = " + std::to_string(counts[i])
                    : " but the counts sum to " + std::to_string(total));
  }
  return std::nullopt;
}

std::string counted(std::int64_t n, const char* noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

bool signatures_agree(const Signature& a, const Signature& b, bool same_counts) {
  if (a.kind != b.kind || a.element != b.element) return false;
  switch (a.kind) {
    case CollectiveKind::all_gather:
      return a.count == b.count;
    case CollectiveKind::all_gather_v:
    case CollectiveKind::reduce_scatter_v:
      // Each member's count is checked against the counts afterwards.
      return same_counts;
    case CollectiveKind::all_reduce:
      return a.count == b.count && a.op == b.op;
    case CollectiveKind::broadcast:
      return a.count == b.count && a.root == b.root;
    case CollectiveKind::split:
    case CollectiveKind::all_gather_object:
    case CollectiveKind::barrier:
      return true;
  }
  return false;
}

std::string describe_message(const char* verb, ElementType element, std::int64_t count) {
  return std::string(verb) + "<" + element_name(element) + ">(" + counted(count, "value") + ")";
}

std::string describe(const Signature& s) {
  const std::string name = kind_name(s.kind);
  const std::string typed = name + "<" + element_name(s.element) + ">";
  const std::string values = counted(s.count, "value");
  switch (s.kind) {
    case CollectiveKind::split:
    case CollectiveKind::barrier:
    case CollectiveKind::all_gather_object:
      return name;
    case CollectiveKind::all_gather:
    case CollectiveKind::all_gather_v:
    case CollectiveKind::reduce_scatter_v:
      return typed + "(" + values + ")";
    case CollectiveKind::all_reduce:
      return typed + "(" + values + ", " + (s.op == ReduceOp::sum ? "sum" : "mean") + ")";
    case CollectiveKind::broadcast:
      return typed + "(" + values + ", root " + std::to_string(s.root) + ")";
  }
  return name;
}

std::string format_counts(std::span<const std::int64_t> counts) {
  constexpr std::size_t kShown = 8;
  std::string text = "[";
  for (std::size_t i = 0; i < counts.size() && i < kShown; ++i) {
    if (i > 0) text += ",";
    text += std::to_string(counts[i]);
  }
  if (counts.size() > kShown) text += ",+" + std::to_string(counts.size() - kShown) + " more";
  return text + "]";
}

std::string world_ranks_text(const std::vector<std::int32_t>& ranks) {
  return ranks.size() == 1 ? "world rank " + std::to_string(ranks[0])
                           : "world ranks " + format_ranks(ranks);
}

}  // namespace infonce::sim::detail
