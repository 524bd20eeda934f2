// SPEC sections 4 and 15: the full-batch SigLIP objective of a case, and its
// gradient with respect to both towers' weights, log_scale and the bias.
#pragma once

#include <vector>

#include "oracle/clip_batch.hpp"
#include "oracle/encoder.hpp"
#include "oracle/siglip_description.hpp"
#include "oracle/siglip_loss.hpp"

namespace infonce::oracle {

// One batch per micro-step (every shard's pairs in shard order). Throws
// InputError where the objective is undefined: no micro-step, a shard without
// pairs or whose image and text rows disagree, a feature width that is not
// its tower's, towers of different D, a non-finite number, or a log_scale
// whose exp overflows.
std::vector<ClipBatch> siglip_batches(const SigLipDescription& description);

// Loss and the derived gradient (siglip_loss_backward and encoder_backward).
SigLipResult evaluate_siglip(const SigLipDescription& description);

// Each micro-step's weight in the objective: 1/A with GA normalisation, else 1.
inline Real siglip_micro_step_weight(const SigLipDescription& description) {
  return description.accumulation_normalize ? 1 / static_cast<Real>(description.micro_steps.size())
                                            : Real(1);
}

// The objective's value alone at the given parameters, for any scalar: the
// forward that AutoDiff differentiates in the tests.
template <class S>
S siglip_objective_value(const SigLipDescription& description,
                         const std::vector<ClipBatch>& batches, const Rows<S>& image_weight,
                         const Rows<S>& text_weight, const S& log_scale, const S& bias) {
  const S weight(siglip_micro_step_weight(description));
  S total(0);
  for (const ClipBatch& batch : batches) {
    const Rows<S> image = encode(image_weight, batch.image, description.image_normalize);
    const Rows<S> text = encode(text_weight, batch.text, description.text_normalize);
    total += weight * siglip_batch_loss(image, text, log_scale, bias);
  }
  return total;
}

}  // namespace infonce::oracle
