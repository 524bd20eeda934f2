#include "oracle/groups.hpp"

#include <string>

#include "base/error.hpp"

namespace infonce::oracle {

std::vector<Group> parse_groups(const std::vector<std::int32_t>& labels, std::int32_t sentences) {
  std::vector<std::int32_t> ones;  // positions of the 1s in the labels
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] == 1) {
      ones.push_back(static_cast<std::int32_t>(i));
    } else if (labels[i] != 0) {
      throw InputError("oracle: label " + std::to_string(i) + " is neither 0 nor 1");
    }
  }
  // Every group has one query without a label.
  if (labels.size() + ones.size() != static_cast<std::size_t>(sentences)) {
    throw InputError("oracle: " + std::to_string(labels.size()) + " labels do not describe " +
                     std::to_string(sentences) + " sentences");
  }
  if (!labels.empty() && labels[0] != 1) {
    throw InputError("oracle: the labels do not start with a positive");
  }
  std::vector<Group> groups(ones.size());
  for (std::size_t i = 0; i < ones.size(); ++i) {
    const auto shift = static_cast<std::int32_t>(i);
    const std::int32_t query = ones[i] + shift;
    const std::int32_t end = i + 1 < ones.size() ? ones[i + 1] + shift + 1 : sentences;
    groups[i].query = query;
    groups[i].positive = query + 1;
    for (std::int32_t row = query + 2; row < end; ++row) groups[i].negatives.push_back(row);
  }
  return groups;
}

}  // namespace infonce::oracle
