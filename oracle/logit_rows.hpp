// SPEC section 2: which similarities make up each group's logit row, and
// where its target is. Index bookkeeping only; the numbers come later
// (cross_entropy.hpp).
#pragma once

#include <cstdint>
#include <vector>

#include "oracle/description.hpp"
#include "oracle/groups.hpp"

namespace infonce::oracle {

enum class Block {
  qd,  // q_g . docs
  qq,  // q_g . q_h
  dd,  // p_g . docs (never threshold-masked)
};

// The similarity of sentences `left` and `right`.
struct Entry {
  std::int32_t left = 0;
  std::int32_t right = 0;
  Block block = Block::qd;
};

// One row of logits. Entries the SPEC sets to -inf unconditionally (qq's own
// entry, dd's entry at t_g) are left out; `target` indexes `entries`.
struct LogitRow {
  std::vector<Entry> entries;
  std::int32_t target = 0;
};

// use_batch: docs = [p_g, n_g..] of every group in order, t_g the index of
// p_g; row g is [q_g . docs | q_g . q_h, h != g | p_g . docs except t_g].
std::vector<LogitRow> batch_rows(const std::vector<Group>& groups, const LossSettings& settings);

// use_batch = false: row g is q_g . [p_g, n_g..], target 0.
std::vector<LogitRow> own_group_rows(const std::vector<Group>& groups);

}  // namespace infonce::oracle
