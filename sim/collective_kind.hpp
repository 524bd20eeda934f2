// What a collective call is (its kind and element type) and the words error
// messages use for it, shared by the fiber engine and the MPI backend so that
// both describe a mismatch the same way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace infonce::sim::detail {

enum class CollectiveKind : std::uint8_t {
  split,
  all_gather,
  all_gather_v,
  all_gather_object,
  all_reduce,
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

// "all_gather", ...; "double", "float", "int64", "bytes" ("" for none).
const char* kind_name(CollectiveKind kind);
const char* element_name(ElementType element);
// "1 value", "3 values".
std::string counted(std::int64_t n, const char* noun);

}  // namespace infonce::sim::detail
