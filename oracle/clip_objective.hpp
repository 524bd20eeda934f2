// SPEC sections 4 and 11: the full-batch CLIP objective of a case, and its
// gradient with respect to both towers' weights, log_scale and the bias.
#pragma once

#include <optional>
#include <vector>

#include "oracle/clip_batch.hpp"
#include "oracle/clip_description.hpp"
#include "oracle/clip_loss.hpp"
#include "oracle/encoder.hpp"

namespace infonce::oracle {

// Loss and the derived gradient (clip_loss_backward and encoder_backward).
// Throws InputError where the case has no defined loss (clip_batches).
ClipResult evaluate_clip(const ClipDescription& description);

// Each micro-step's weight in the objective: 1/A with GA normalisation, else 1.
inline Real clip_micro_step_weight(const ClipDescription& description) {
  return description.accumulation_normalize ? 1 / static_cast<Real>(description.micro_steps.size())
                                            : Real(1);
}

// The objective's value alone at the given parameters, for any scalar: the
// forward that AutoDiff differentiates in the tests. `batches` are
// clip_batches(description).
template <class S>
S clip_objective_value(const ClipDescription& description, const std::vector<ClipBatch>& batches,
                       const Rows<S>& image_weight, const Rows<S>& text_weight, const S& log_scale,
                       const std::optional<S>& bias) {
  const S weight(clip_micro_step_weight(description));
  S total(0);
  for (const ClipBatch& batch : batches) {
    const Rows<S> image = encode(image_weight, batch.image, description.image_normalize);
    const Rows<S> text = encode(text_weight, batch.text, description.text_normalize);
    total += weight * clip_batch_loss(image, text, log_scale, bias);
  }
  return total;
}

}  // namespace infonce::oracle
