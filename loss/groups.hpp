// Group layout: which rows of the embedding matrix form each group
// [q, p, n_1..n_k], recovered from labels exactly as the trainer does
// (`_parse_multi_negative_sentences`), then resized for `hard_negatives`.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "loss/settings.hpp"

namespace infonce::loss {

// CSR layout: group g is rows[offsets[g] .. offsets[g+1]), i.e. row indices
// into the embedding matrix of [q, p, n_1..n_k]. A row may appear in several
// places after padding (its gradient then adds up).
struct GroupLayout {
  std::vector<std::int32_t> rows;
  std::vector<std::int32_t> offsets{0};

  std::int32_t group_count() const { return static_cast<std::int32_t>(offsets.size()) - 1; }
  std::span<const std::int32_t> group(std::int32_t g) const {
    return {rows.data() + offsets[g], static_cast<std::size_t>(offsets[g + 1] - offsets[g])};
  }
  std::int32_t negative_count(std::int32_t g) const { return offsets[g + 1] - offsets[g] - 2; }
  void add_group(std::span<const std::int32_t> group_rows);
};

// Labels of groups laid end to end: group g contributes [1, 0 x k_g].
std::vector<std::uint8_t> labels_for_negative_counts(std::span<const std::int32_t> negative_counts);

// The trainer's split: the i-th 1 in labels, shifted by i, is group i's query
// row. Throws InputError if labels describe more rows than `row_count`.
GroupLayout parse_groups(std::span<const std::uint8_t> labels, std::int32_t row_count);

// Where padding indices come from: a seeded generator or recorded draws.
class PaddingDrawSource {
 public:
  virtual ~PaddingDrawSource() = default;
  // One index j, uniform in [0, negative_count). negative_count >= 1.
  virtual std::int32_t draw(std::int32_t negative_count) = 0;
};

// `hard_negatives = H`: keep the first H negatives of a longer group; pad a
// shorter one with H - k draws (legacy: row j+1, fixed: row j+2 of the group).
// Throws InputError if a group has no negative (the trainer asserts).
GroupLayout resize_hard_negatives(const GroupLayout& layout, std::int32_t hard_negatives,
                                  Padding padding, PaddingDrawSource& draws);

}  // namespace infonce::loss
