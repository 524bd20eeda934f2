#include "sim/collective_kind.hpp"

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

std::string counted(std::int64_t n, const char* noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

}  // namespace infonce::sim::detail
