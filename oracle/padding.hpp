// SPEC section 2, hard-negative resizing, from the draws the step used.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "oracle/description.hpp"
#include "oracle/groups.hpp"

namespace infonce::oracle {

// Hands out recorded draws in order.
class DrawStream {
 public:
  explicit DrawStream(const Draws& draws) : draws_(draws) {}
  // The next draw; InputError when none is left.
  std::int32_t take();
  std::size_t left() const { return draws_.size() - next_; }

 private:
  const Draws& draws_;
  std::size_t next_ = 0;
};

// Every group keeps its first H negatives; a group with k < H takes H - k
// draws j (in [0, k), group by group) and appends row j + 1 (legacy) or
// j + 2 (fixed) of its own `[q, p, n_1..n_k]`. A group without negatives is
// an InputError (the trainer asserts).
void resize_hard_negatives(std::vector<Group>& groups, std::int32_t hard_negatives,
                           PaddingRow padding, DrawStream& draws);

}  // namespace infonce::oracle
