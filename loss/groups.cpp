#include "loss/groups.hpp"

#include <algorithm>

#include <string>

#include "base/assert.hpp"
#include "base/error.hpp"

namespace infonce::loss {

void GroupLayout::add_group(std::span<const std::int32_t> group_rows) {
  INFONCE_ASSERT(group_rows.size() >= 2);  // a group is at least [q, p]
  rows.insert(rows.end(), group_rows.begin(), group_rows.end());
  offsets.push_back(static_cast<std::int32_t>(rows.size()));
}

std::vector<std::uint8_t> labels_for_negative_counts(
    std::span<const std::int32_t> negative_counts) {
  std::vector<std::uint8_t> labels;
  std::size_t rows = 0;
  for (const std::int32_t k : negative_counts) rows += 1 + static_cast<std::size_t>(std::max(k, 0));
  labels.reserve(rows);
  for (std::size_t g = 0; g < negative_counts.size(); ++g) {
    const std::int32_t k = negative_counts[g];
    if (k < 0) {
      throw InputError("negative_counts[" + std::to_string(g) + "] = " + std::to_string(k) +
                       " must be >= 0");
    }
    labels.push_back(1);
    labels.insert(labels.end(), static_cast<std::size_t>(k), 0);
  }
  return labels;
}

GroupLayout parse_groups(std::span<const std::uint8_t> labels, std::int32_t row_count) {
  // numpy: split = nonzero(labels) + [len(labels)], then split += arange(len(split)).
  // A label is "1" when nonzero, as torch.nonzero reads it.
  std::vector<std::int64_t> split;
  split.reserve(static_cast<std::size_t>(
                    std::ranges::count_if(labels, [](std::uint8_t l) { return l != 0; })) +
                1);
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] != 0) split.push_back(static_cast<std::int64_t>(i));
  }
  split.push_back(static_cast<std::int64_t>(labels.size()));
  for (std::size_t i = 0; i < split.size(); ++i) split[i] += static_cast<std::int64_t>(i);

  const std::int64_t rows_needed = split.back();
  if (rows_needed > row_count) {
    throw InputError("labels describe " + std::to_string(rows_needed) + " rows (" +
                     std::to_string(split.size() - 1) + " groups) but there are only " +
                     std::to_string(row_count) + " embeddings");
  }
  GroupLayout layout;
  layout.rows.reserve(static_cast<std::size_t>(rows_needed));
  layout.offsets.reserve(split.size());
  for (std::size_t i = 0; i + 1 < split.size(); ++i) {
    // Consecutive split points differ by >= 2, so every group has [q, p].
    for (std::int64_t r = split[i]; r < split[i + 1]; ++r) {
      layout.rows.push_back(static_cast<std::int32_t>(r));
    }
    layout.offsets.push_back(static_cast<std::int32_t>(layout.rows.size()));
  }
  return layout;
}

GroupLayout resize_hard_negatives(const GroupLayout& layout, std::int32_t hard_negatives,
                                  Padding padding, PaddingDrawSource& draws) {
  if (hard_negatives < 0) {
    throw InputError("hard_negatives = " + std::to_string(hard_negatives) + " must be >= 0");
  }
  // legacy takes row j + 1 of [q, p, n_1..n_k] (j = 0 is the positive); fixed skips it.
  const std::int32_t row_shift = padding == Padding::legacy ? 1 : 2;
  const auto group_size = static_cast<std::size_t>(hard_negatives) + 2;
  GroupLayout resized;
  resized.rows.reserve(static_cast<std::size_t>(layout.group_count()) * group_size);
  resized.offsets.reserve(static_cast<std::size_t>(layout.group_count()) + 1);
  for (std::int32_t g = 0; g < layout.group_count(); ++g) {
    const std::span<const std::int32_t> rows = layout.group(g);
    const std::int32_t k = layout.negative_count(g);
    if (k == 0) {
      throw InputError("hard_negatives needs >= 1 negative per group (group " + std::to_string(g) +
                       " has none)");
    }
    if (k >= hard_negatives) {
      resized.rows.insert(resized.rows.end(), rows.begin(), rows.begin() + hard_negatives + 2);
    } else {
      resized.rows.insert(resized.rows.end(), rows.begin(), rows.end());
      for (std::int32_t extra = 0; extra < hard_negatives - k; ++extra) {
        const std::int32_t j = draws.draw(k);
        INFONCE_ASSERT(j >= 0 && j < k);
        resized.rows.push_back(rows[static_cast<std::size_t>(j + row_shift)]);
      }
    }
    resized.offsets.push_back(static_cast<std::int32_t>(resized.rows.size()));
  }
  return resized;
}

}  // namespace infonce::loss
