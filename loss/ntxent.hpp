// The NT-Xent loss family (SimCLR; SPEC section 14): N samples seen twice,
// one shared encoder (e = W x, optional L2 normalisation, loss/encoder.hpp),
// 2N rows laid out as every first view, then every second view. Row k's
// logits are z_kj = tau * r_k . r_j (tau = 1 / T, or a learnable inverse
// temperature) over every row j != k of both views; its target is its
// sample's other view:
//
//   L = (1 / n) sum over the query rows k of  logsumexp_{j != k} z_kj - z_k,pos(k)
//
// Global loss: the queries are all 2N rows (n = 2N). Local loss: a rank's
// queries are its own 2 n_d rows against every gathered row, each query
// knowing its own position in the gathered rows (kept out of its softmax) and
// its positive's. Pure math, no ranks.
#pragma once

#include <vector>

#include "loss/matrix.hpp"

namespace infonce::loss {

// Where one query row sits among the keys, and where its positive does.
struct NtXentQuery {
  Eigen::Index self = 0;
  Eigen::Index positive = 0;
};

// The positions of the global loss over 2N rows: query k is key k, its
// positive is k + N (first views) or k - N (second views).
std::vector<NtXentQuery> ntxent_global_queries(Eigen::Index samples);

template <class Scalar>
struct NtXentRows {
  const Matrix<Scalar>& queries;              // n x D
  const Matrix<Scalar>& keys;                 // M x D: every gathered row, both views
  const std::vector<NtXentQuery>& positions;  // one per query row
};

template <class Scalar>
struct NtXentRowsGradient {
  Scalar loss = 0;
  Matrix<Scalar> grad_queries;  // n x D: each row in its query role
  Matrix<Scalar> grad_keys;     // M x D: each row in its key role
  Scalar grad_inverse_temperature = 0;
  Scalar grad_inverse_temperature_magnitude = 0;  // sum of its terms' |.|: its rounding scale
};

// Loss and exact gradient with respect to the query rows, the key rows and
// tau. Throws InputError on mismatched shapes, no query, positions outside
// the keys (or a query's positive at its own position), non-finite input, a
// tau that is not finite and > 0, or overflowing logits.
template <class Scalar>
NtXentRowsGradient<Scalar> ntxent_loss_and_gradient(const NtXentRows<Scalar>& rows,
                                                    double inverse_temperature);

// The full-batch objective of one micro-step over paired features (row i of
// each is sample i), gradient with respect to W and tau.
template <class Scalar>
struct NtXentFullBatchResult {
  Scalar loss = 0;
  Matrix<Scalar> grad_weight;            // D x F
  Matrix<Scalar> grad_weight_magnitude;  // encode_backward_magnitude
  Scalar grad_inverse_temperature = 0;
  Scalar grad_inverse_temperature_magnitude = 0;
};

template <class Scalar>
NtXentFullBatchResult<Scalar> ntxent_full_batch(const Matrix<double>& weight, bool normalize,
                                                const Matrix<double>& first_views,
                                                const Matrix<double>& second_views,
                                                double inverse_temperature);

}  // namespace infonce::loss
