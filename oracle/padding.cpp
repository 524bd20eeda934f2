#include "oracle/padding.hpp"

#include <string>

#include "base/error.hpp"

namespace infonce::oracle {

std::int32_t DrawStream::take() {
  if (next_ == draws_.size()) throw InputError("oracle: the padding draws ran out");
  return draws_[next_++];
}

void resize_hard_negatives(std::vector<Group>& groups, std::int32_t hard_negatives,
                           PaddingRow padding, DrawStream& draws) {
  const std::int32_t offset = padding == PaddingRow::legacy ? 1 : 2;
  for (Group& group : groups) {
    const auto k = static_cast<std::int32_t>(group.negatives.size());
    if (k == 0) throw InputError("oracle: hard_negatives needs >= 1 negative per group");
    if (k >= hard_negatives) {
      group.negatives.resize(static_cast<std::size_t>(hard_negatives));
      continue;
    }
    for (std::int32_t n = k; n < hard_negatives; ++n) {
      const std::int32_t j = draws.take();
      if (j < 0 || j >= k) {
        throw InputError("oracle: padding draw " + std::to_string(j) + " outside [0, " +
                         std::to_string(k) + ")");
      }
      // Rows of the group counted from its query: 0 q, 1 p, 2 n_1, ...
      group.negatives.push_back(group.query + j + offset);
    }
  }
}

}  // namespace infonce::oracle
