// SPEC section 1: group boundaries recovered from the labels alone.
#pragma once

#include <cstdint>
#include <vector>

namespace infonce::oracle {

// Sentence indices of one group.
struct Group {
  std::int32_t query = 0;
  std::int32_t positive = 0;
  std::vector<std::int32_t> negatives;
};

// The i-th 1 in `labels`, shifted by i, is where group i's query sits; the
// group runs to the next query (or the end of the list). Throws InputError
// when the labels cannot describe `sentences` rows.
std::vector<Group> parse_groups(const std::vector<std::int32_t>& labels, std::int32_t sentences);

}  // namespace infonce::oracle
