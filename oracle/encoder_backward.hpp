// The derived gradient of encode() with respect to W.
#pragma once

#include "oracle/real.hpp"

namespace infonce::oracle {

// Adds `factor` * dL/dW to `grad` and the absolute value of every term of
// that sum to `magnitude`, given dL/dE (rows x D) for the embeddings of
// `sentences`. Normalised: with y = e / n, n = ||e|| > eps,
// dL/de = (dL/dy - y (y . dL/dy)) / n; below eps the divisor is the constant eps.
void add_encoder_backward(const RealRows& weight, const RealRows& sentences, bool normalize,
                          const RealRows& grad_embeddings, Real factor, RealRows& grad,
                          RealRows& magnitude);

// The same map on absolute values, from a bound on |dL/dE| to a bound on the
// terms of dL/dW: (|g| + |y| (|y| . |g|)) / n through the normalisation.
void add_encoder_backward_bound(const RealRows& weight, const RealRows& sentences, bool normalize,
                                const RealRows& grad_embeddings_bound, Real factor,
                                RealRows& bound);

}  // namespace infonce::oracle
