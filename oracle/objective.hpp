// SPEC section 4: the full-batch objective of a case, its reported losses and
// its gradient with respect to W.
#pragma once

#include "oracle/cross_entropy.hpp"
#include "oracle/description.hpp"
#include "oracle/encoder.hpp"
#include "oracle/objective_terms.hpp"

namespace infonce::oracle {

// Loss, reported losses and the derived gradient (cross_entropy_backward and
// encoder_backward). Throws InputError where the case has no defined loss.
Result evaluate(const Description& description);

// The objective's value alone at weight W and inverse temperature tau, for
// any scalar: the forward that AutoDiff differentiates in the tests (in W and
// tau at once).
template <class S>
S objective_value(const Description& description, const std::vector<LossTerm>& terms,
                  const Rows<S>& weight, const S& inverse_temperature) {
  S total(0);
  for (const LossTerm& term : terms) {
    const Rows<S> embeddings = encode(weight, term.sentences, description.normalize);
    total += S(term.weight) * mean_cross_entropy(embeddings, term.rows, description.loss,
                                                 term.apply_mask, inverse_temperature);
  }
  return total;
}

// The same at the description's own tau = 1 / T.
template <class S>
S objective_value(const Description& description, const std::vector<LossTerm>& terms,
                  const Rows<S>& weight) {
  return objective_value(description, terms, weight, S(1 / description.loss.temperature));
}

}  // namespace infonce::oracle
