#include "sim/rank_format.hpp"

#include <cstddef>

#include "base/concat.hpp"

namespace infonce::sim::detail {

namespace {

bool is_progression(std::span<const std::int32_t> ranks) {
  const std::int64_t step = std::int64_t{ranks[1]} - ranks[0];
  if (step == 0) return false;
  for (std::size_t i = 2; i < ranks.size(); ++i) {
    if (std::int64_t{ranks[i]} - ranks[i - 1] != step) return false;
  }
  return true;
}

std::string format_progression(std::span<const std::int32_t> ranks) {
  if (ranks[1] - ranks[0] == 1) {
    return concat("{", std::to_string(ranks.front()), "..", std::to_string(ranks.back()), "}");
  }
  return concat("{", std::to_string(ranks[0]), ",", std::to_string(ranks[1]), ",..,",
                std::to_string(ranks.back()), "}");
}

}  // namespace

std::string format_ranks(std::span<const std::int32_t> ranks, std::size_t max_items) {
  if (ranks.size() >= 4 && is_progression(ranks)) return format_progression(ranks);
  std::string text = "{";
  std::size_t items = 0;
  std::size_t i = 0;
  while (i < ranks.size()) {
    if (items == max_items) {
      text.append(",+").append(std::to_string(ranks.size() - i)).append(" more");
      break;
    }
    // A run of consecutive ranks i..j-1.
    std::size_t j = i + 1;
    while (j < ranks.size() && std::int64_t{ranks[j]} == std::int64_t{ranks[j - 1]} + 1) ++j;
    if (items > 0) text += ",";
    if (j - i >= 3) {
      text.append(std::to_string(ranks[i])).append("..").append(std::to_string(ranks[j - 1]));
      i = j;
    } else {
      text += std::to_string(ranks[i]);
      ++i;
    }
    ++items;
  }
  return text + "}";
}

std::string format_group(const Group& group) {
  return concat("group ", std::to_string(group.id), " ", format_ranks(group.world_ranks));
}

}  // namespace infonce::sim::detail
