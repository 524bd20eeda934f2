// Joining strings in one allocation, without `"literal" + std::string`.
// GCC 12 at -O3 inlines that operator+ (an insert at position 0 into the
// right-hand string) into a memcpy it then wrongly reports as overlapping
// (-Wrestrict, GCC bug 105651); concat() sizes the result once and appends
// each part, which is also what the chain of operator+ meant.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace infonce {

template <class... Parts>
std::string concat(const Parts&... parts) {
  static_assert(sizeof...(Parts) > 0, "concat needs at least one part");
  const std::string_view views[] = {std::string_view(parts)...};
  std::size_t size = 0;
  for (const std::string_view view : views) size += view.size();
  std::string text;
  text.reserve(size);
  for (const std::string_view view : views) text.append(view);
  return text;
}

}  // namespace infonce
