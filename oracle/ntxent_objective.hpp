// SPEC sections 4 and 14: the full-batch NT-Xent objective of a case, and its
// gradient with respect to the shared encoder's weight and the inverse
// temperature.
#pragma once

#include <vector>

#include "oracle/encoder.hpp"
#include "oracle/ntxent_batch.hpp"
#include "oracle/ntxent_description.hpp"
#include "oracle/ntxent_loss.hpp"

namespace infonce::oracle {

// Loss and the derived gradient (ntxent_loss_backward and encoder_backward).
// Throws InputError where the case has no defined loss (ntxent_batches).
NtXentResult evaluate_ntxent(const NtXentDescription& description);

// Each micro-step's weight in the objective: 1/A with GA normalisation, else 1.
inline Real ntxent_micro_step_weight(const NtXentDescription& description) {
  return description.accumulation_normalize ? 1 / static_cast<Real>(description.micro_steps.size())
                                            : Real(1);
}

// The objective's value alone at weight W and inverse temperature tau, for
// any scalar: the forward that AutoDiff differentiates in the tests.
// `batches` are ntxent_batches(description).
template <class S>
S ntxent_objective_value(const NtXentDescription& description,
                         const std::vector<NtXentBatch>& batches, const Rows<S>& weight,
                         const S& tau) {
  const S micro_weight(ntxent_micro_step_weight(description));
  S total(0);
  for (const NtXentBatch& batch : batches) {
    total += micro_weight *
             ntxent_batch_loss(encode(weight, batch.features, description.normalize), tau);
  }
  return total;
}

}  // namespace infonce::oracle
