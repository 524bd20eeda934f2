// The trainer's InfoNCE settings (MODEL.md section 2), with the trainer's defaults.
#pragma once

#include <cstdint>
#include <optional>

namespace infonce::loss {

// How `hard_negatives` pads a short group. legacy: the trainer before its fix
// (draw j in 0..k-1, take row j+1 of [q, p, n_1..n_k], so the positive can be
// drawn); fixed: take row j+2 (negatives only).
enum class Padding { legacy, fixed };

struct LossSettings {
  double temperature = 0.1;
  bool use_batch = true;
  std::optional<std::int32_t> hard_negatives;  // unset: keep every negative
  Padding padding = Padding::legacy;
  bool mask_fake_negative = false;
  double fake_neg_margin = 0.1;
  bool include_qq = false;
  bool include_dd = false;
};

// The trainer has two implementations of the loss: a batched one (every group
// the same size, or hard_negatives set) and a per-group loop. `automatic`
// picks the way the trainer does.
enum class CodePath { automatic, batched, loop };

}  // namespace infonce::loss
