// The plain description of one CLIP case (SPEC section 11, with section 10's
// log_scale and bias): both towers' weights, the pairs of every DP shard and
// micro-step, and the settings. Numbers and flags only, like description.hpp.
#pragma once

#include <optional>
#include <vector>

#include "oracle/real.hpp"

namespace infonce::oracle {

// One DP shard's micro-batch: n >= 1 pairs, row i of `image` and row i of
// `text` being pair i.
struct ClipShardInput {
  RealRows image;  // n x F_image
  RealRows text;   // n x F_text
};

struct ClipDescription {
  RealRows image_weight;  // D x F_image
  bool image_normalize = true;
  RealRows text_weight;  // D x F_text
  bool text_normalize = true;
  Real log_scale = 0;                  // logits exp(log_scale) * a . b (+ bias)
  std::optional<Real> bias;            // absent: no bias term (its gradient reported as 0)
  bool accumulation_normalize = true;  // divide each micro-step's loss by A
  std::vector<std::vector<ClipShardInput>> micro_steps;  // [micro][dp shard]
};

struct ClipResult {
  Real loss = 0;  // the full-batch objective: sum over micro-steps (/ A)
  RealRows grad_image_weight, grad_text_weight;  // D x F_image, D x F_text
  Real grad_log_scale = 0, grad_bias = 0;
  // Per entry (or parameter), the sum of |terms| it adds up: the scale at
  // which a different summation order perturbs it (as Result::grad_magnitude).
  RealRows grad_image_magnitude, grad_text_magnitude;
  Real grad_log_scale_magnitude = 0, grad_bias_magnitude = 0;
  // Bounds on the terms with softmax - onehot taken apart: the scale at which
  // rounding the logits perturbs them (as Result::grad_bound).
  RealRows grad_image_bound, grad_text_bound;
  Real grad_log_scale_bound = 0, grad_bias_bound = 0;
  Real max_abs_logit = 0;           // over every logit, bias included
  Real max_encoding_condition = 1;  // encoder.hpp's, over both towers' rows
  Real max_logit_magnitude = 0;     // logit_magnitude.hpp's, over every micro-step
  // The sum over every logit of the bound on |d loss / d z| (softmax, +1 at
  // the target, / 2N, as the micro-steps weight them): what a rounding of
  // each z moves the loss by.
  Real logit_gradient_bound = 0;
};

}  // namespace infonce::oracle
