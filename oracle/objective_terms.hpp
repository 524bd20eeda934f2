// SPEC sections 3 and 4: the objective is a weighted sum of section-2 losses,
// one per micro-step (use_batch: over every shard's groups, in DP order) or
// per micro-step and shard (use_batch = false).
#pragma once

#include <cstdint>
#include <vector>

#include "oracle/description.hpp"
#include "oracle/logit_rows.hpp"

namespace infonce::oracle {

struct LossTerm {
  RealRows sentences;  // the sentences this loss encodes
  std::vector<LogitRow> rows;
  bool apply_mask = false;  // mask_fake_negative under use_batch
  Real weight = 1;          // in the objective: 1/A with GA normalisation, 1/P per shard...
  Real report_weight = 1;   // ...and in the reported loss (no 1/P)
  std::int32_t shard = -1;  // whose reported loss it adds to; -1: every shard's
};

// Parses labels, pads from the recorded draws and lays out the logit rows.
// Throws InputError for a loss without groups, a group without negatives
// under hard_negatives, or draws that do not fit (too few, out of range, or
// some left over).
std::vector<LossTerm> objective_terms(const Description& description);

}  // namespace infonce::oracle
