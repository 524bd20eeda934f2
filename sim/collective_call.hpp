// What a collective call is (kind, element type, the fields its members must
// agree on), the rule for when members' calls agree, and the words error
// messages use for them: shared by the fiber engine and the MPI backend, so
// both accept the same programs and describe a mismatch the same way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "sim/communicator.hpp"

namespace infonce::sim::detail {

enum class CollectiveKind : std::uint8_t {
  split,
  all_gather,
  all_gather_v,
  all_gather_object,
  all_reduce,
  reduce_scatter_v,
  broadcast,
  barrier,
};

enum class ElementType : std::uint8_t { none, f64, f32, i64, byte };

template <class T>
constexpr ElementType element_type_of();
template <>
constexpr ElementType element_type_of<double>() {
  return ElementType::f64;
}
template <>
constexpr ElementType element_type_of<float>() {
  return ElementType::f32;
}
template <>
constexpr ElementType element_type_of<std::int64_t>() {
  return ElementType::i64;
}
template <>
constexpr ElementType element_type_of<std::byte>() {
  return ElementType::byte;
}

// What a call must agree on with the other members' calls.
struct Signature {
  CollectiveKind kind = CollectiveKind::barrier;
  ElementType element = ElementType::none;
  std::int64_t count = 0;
  ReduceOp op = ReduceOp::sum;
  std::int32_t root = 0;
};

// Whether two members' calls can form one collective: the same kind and
// element type, and the fields that kind needs equal. `same_counts`: the
// all_gather_v / reduce_scatter_v counts are equal (each backend compares
// them its own way).
bool signatures_agree(const Signature& a, const Signature& b, bool same_counts);

// "all_gather<double>(3 values)", "all_reduce<float>(2 values, sum)", "barrier".
std::string describe(const Signature& signature);
// A point-to-point call: "send<double>(3 values)", "recv<float>(1 value)".
std::string describe_message(const char* verb, ElementType element, std::int64_t count);
// "[1,2,3]", at most 8 shown.
std::string format_counts(std::span<const std::int64_t> counts);
// "world rank 3" or "world ranks 0,2".
std::string world_ranks_text(const std::vector<std::int32_t>& ranks);

// Whether members pass counts (all_gather_v, reduce_scatter_v).
bool takes_counts(CollectiveKind kind);

// One member's call as the counts check sees it.
struct MemberCall {
  std::int64_t world_rank = 0;
  std::int64_t call_number = 0;
  std::int64_t count = 0;  // the values it gives
};
// For a kind that takes counts, once every member is known to pass these
// `counts`: why they do not fit the members (one entry per member, none
// negative, all_gather_v member i giving counts[i] values, reduce_scatter_v
// members giving their sum), or nothing. Without the "collective #k on
// group ...: " prefix.
std::optional<std::string> counts_problem(CollectiveKind kind, std::span<const std::int64_t> counts,
                                          std::span<const MemberCall> members);

// "all_gather", ...; "double", "float", "int64", "bytes" ("" for none).
const char* kind_name(CollectiveKind kind);
const char* element_name(ElementType element);
// "1 value", "3 values".
std::string counted(std::int64_t n, const char* noun);

}  // namespace infonce::sim::detail
