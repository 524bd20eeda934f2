// The plain description of one NT-Xent case (SPEC section 14, with section
// 10's learnable inverse temperature): the shared encoder's weight, both views
// of every DP shard's samples per micro-step, and the settings. Numbers and
// flags only, like description.hpp.
#pragma once

#include <vector>

#include "oracle/real.hpp"

namespace infonce::oracle {

// One DP shard's micro-batch: n >= 1 samples, row i of `first` and row i of
// `second` being sample i's two views.
struct NtXentShardInput {
  RealRows first;   // n x F
  RealRows second;  // n x F
};

struct NtXentDescription {
  RealRows weight;  // W, D x F: one encoder for both views
  bool normalize = true;
  Real temperature = 0.1L;             // logits tau * r_k . r_j with tau = 1 / temperature
  bool learnable_temperature = false;  // tau is a parameter: the result reports d / d tau
  bool accumulation_normalize = true;  // divide each micro-step's loss by A
  std::vector<std::vector<NtXentShardInput>> micro_steps;  // [micro][dp shard]
};

struct NtXentResult {
  Real loss = 0;         // the full-batch objective: sum over micro-steps (/ A)
  RealRows grad_weight;  // d loss / dW, D x F
  // Per entry, the sum of |terms| it adds up (its rounding scale), and the
  // terms' bound with softmax - onehot taken apart (as Result's).
  RealRows grad_weight_magnitude, grad_weight_bound;
  // d loss / d tau (reported whether or not tau is learnable), its magnitude
  // and bound.
  Real grad_inverse_temperature = 0;
  Real grad_inverse_temperature_magnitude = 0;
  Real grad_inverse_temperature_bound = 0;
  Real max_abs_logit = 0;
  Real max_encoding_condition = 1;  // encoder.hpp's, over every encoded row
};

}  // namespace infonce::oracle
