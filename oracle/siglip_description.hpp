// The plain description of one SigLIP case (SPEC section 15): both towers'
// weights, the pairs of every DP shard and micro-step, and the settings.
// Numbers and flags only, like description.hpp.
#pragma once

#include <vector>

#include "oracle/clip_description.hpp"
#include "oracle/real.hpp"

namespace infonce::oracle {

struct SigLipDescription {
  RealRows image_weight;  // D x F_image
  bool image_normalize = true;
  RealRows text_weight;  // D x F_text
  bool text_normalize = true;
  Real log_scale = 0;  // logits exp(log_scale) * a . b + bias
  Real bias = 0;
  bool accumulation_normalize = true;                    // divide each micro-step's loss by A
  std::vector<std::vector<ClipShardInput>> micro_steps;  // [micro][dp shard], pairs as CLIP's
};

struct SigLipResult {
  Real loss = 0;  // the full-batch objective: sum over micro-steps (/ A)
  RealRows grad_image_weight, grad_text_weight;  // D x F_image, D x F_text
  Real grad_log_scale = 0, grad_bias = 0;
  // Per entry (or parameter), the sum of |terms| it adds up.
  RealRows grad_image_magnitude, grad_text_magnitude;
  Real grad_log_scale_magnitude = 0, grad_bias_magnitude = 0;
  // Bounds on the terms with every d loss / d logit replaced by its largest
  // value 1 / N: the scale at which rounding the logits perturbs them.
  RealRows grad_image_bound, grad_text_bound;
  Real grad_log_scale_bound = 0, grad_bias_bound = 0;
  Real max_abs_logit = 0;           // over every logit, bias included
  Real max_encoding_condition = 1;  // encoder.hpp's, over both towers' rows
  Real max_logit_magnitude = 0;     // logit_magnitude.hpp's, over every micro-step
  // The sum over every logit of the bound on |d loss / d z| (1 / N each, as
  // the micro-steps weight them): what a rounding of each z moves the loss by.
  Real logit_gradient_bound = 0;
};

}  // namespace infonce::oracle
