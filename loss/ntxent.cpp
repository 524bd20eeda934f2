#include "loss/ntxent.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "base/error.hpp"
#include "loss/encoder.hpp"
#include "loss/ordered_dot.hpp"

namespace infonce::loss {

namespace {

std::string shape(Eigen::Index rows, Eigen::Index cols) {
  return std::to_string(rows) + " x " + std::to_string(cols);
}

void check_position(const NtXentQuery& q, Eigen::Index keys, std::size_t row) {
  const auto inside = [keys](Eigen::Index i) { return i >= 0 && i < keys; };
  if (!inside(q.self) || !inside(q.positive) || q.self == q.positive) {
    throw InputError("NT-Xent query " + std::to_string(row) + ": self " + std::to_string(q.self) +
                     ", positive " + std::to_string(q.positive) +
                     " must be two different rows of the " + std::to_string(keys) + " keys");
  }
}

template <class Scalar>
void check_rows(const NtXentRows<Scalar>& rows, double tau) {
  const Eigen::Index queries = rows.queries.rows();
  if (queries == 0) throw InputError("the NT-Xent loss needs at least one query row");
  if (rows.keys.cols() != rows.queries.cols()) {
    throw InputError("NT-Xent keys are " + shape(rows.keys.rows(), rows.keys.cols()) +
                     ", the queries " + shape(queries, rows.queries.cols()));
  }
  if (static_cast<Eigen::Index>(rows.positions.size()) != queries) {
    throw InputError("NT-Xent: " + std::to_string(rows.positions.size()) + " positions for " +
                     std::to_string(queries) + " query rows");
  }
  for (std::size_t r = 0; r < rows.positions.size(); ++r) {
    check_position(rows.positions[r], rows.keys.rows(), r);
  }
  if (!std::isfinite(tau) || tau <= 0) {
    throw InputError("NT-Xent inverse temperature must be finite and > 0");
  }
  if (!rows.queries.allFinite() || !rows.keys.allFinite()) {
    throw InputError("NT-Xent embeddings must be finite");
  }
}

// Row i's dL/dz (softmax - onehot over the keys but its own, / n) into
// `grad_logits`, and its loss term; `similarity` holds its raw dot products.
template <class Scalar>
Scalar add_query_row(Eigen::Index i, const NtXentQuery& q, Scalar tau, Scalar n,
                     const Matrix<Scalar>& similarity, Matrix<Scalar>& grad_logits) {
  Scalar largest = -INFINITY;
  for (Eigen::Index j = 0; j < similarity.cols(); ++j) {
    if (j != q.self) largest = std::max(largest, tau * similarity(i, j));
  }
  if (!std::isfinite(largest)) throw InputError("NT-Xent logits overflow: tau * similarity");
  Scalar sum = 0;
  for (Eigen::Index j = 0; j < similarity.cols(); ++j) {
    const Scalar e = j == q.self ? Scalar(0) : std::exp(tau * similarity(i, j) - largest);
    grad_logits(i, j) = e;
    sum += e;
  }
  grad_logits.row(i) /= sum;
  grad_logits(i, q.positive) -= Scalar(1);
  grad_logits.row(i) /= n;
  return (std::log(sum) + largest - tau * similarity(i, q.positive)) / n;
}

}  // namespace

std::vector<NtXentQuery> ntxent_global_queries(Eigen::Index samples) {
  std::vector<NtXentQuery> out;
  for (Eigen::Index k = 0; k < 2 * samples; ++k) {
    out.push_back({k, k < samples ? k + samples : k - samples});
  }
  return out;
}

template <class Scalar>
NtXentRowsGradient<Scalar> ntxent_loss_and_gradient(const NtXentRows<Scalar>& rows,
                                                    double inverse_temperature) {
  check_rows(rows, inverse_temperature);
  const auto tau = static_cast<Scalar>(inverse_temperature);
  const Matrix<Scalar>& queries = rows.queries;
  const Matrix<Scalar>& keys = rows.keys;
  Matrix<Scalar> similarity(queries.rows(), keys.rows());
  ordered_products<Scalar>(similarity, queries, keys);
  Matrix<Scalar> grad_logits(queries.rows(), keys.rows());
  const auto n = static_cast<Scalar>(queries.rows());
  NtXentRowsGradient<Scalar> out;
  for (Eigen::Index i = 0; i < queries.rows(); ++i) {
    out.loss += add_query_row(i, rows.positions[static_cast<std::size_t>(i)], tau, n, similarity,
                              grad_logits);
  }
  // dz_ij/dq_i = tau k_j, dz_ij/dk_j = tau q_i, dz_ij/dtau = s_ij; summed in index order.
  out.grad_queries = Matrix<Scalar>::Zero(queries.rows(), queries.cols());
  out.grad_keys = Matrix<Scalar>::Zero(keys.rows(), keys.cols());
  for (Eigen::Index i = 0; i < queries.rows(); ++i) {
    for (Eigen::Index j = 0; j < keys.rows(); ++j) {
      const Scalar g = grad_logits(i, j);
      out.grad_queries.row(i) += g * tau * keys.row(j);
      out.grad_keys.row(j) += g * tau * queries.row(i);
      out.grad_inverse_temperature += g * similarity(i, j);
      out.grad_inverse_temperature_magnitude += std::fabs(g * similarity(i, j));
    }
  }
  return out;
}

template <class Scalar>
NtXentFullBatchResult<Scalar> ntxent_full_batch(const Matrix<double>& weight, bool normalize,
                                                const Matrix<double>& first_views,
                                                const Matrix<double>& second_views,
                                                double inverse_temperature) {
  if (first_views.rows() != second_views.rows() || first_views.cols() != second_views.cols()) {
    throw InputError("NT-Xent views: " + shape(first_views.rows(), first_views.cols()) +
                     " first and " + shape(second_views.rows(), second_views.cols()) + " second");
  }
  Matrix<Scalar> features(2 * first_views.rows(), first_views.cols());
  features << first_views.cast<Scalar>(), second_views.cast<Scalar>();
  const Matrix<Scalar> w = weight.cast<Scalar>();
  const Matrix<Scalar> rows = encode(w, features, normalize);
  const std::vector<NtXentQuery> positions = ntxent_global_queries(first_views.rows());
  const NtXentRowsGradient<Scalar> g =
      ntxent_loss_and_gradient<Scalar>({rows, rows, positions}, inverse_temperature);
  const Matrix<Scalar> grad_rows = g.grad_queries + g.grad_keys;
  NtXentFullBatchResult<Scalar> out;
  out.loss = g.loss;
  out.grad_weight = encode_backward(w, features, normalize, grad_rows);
  out.grad_weight_magnitude = encode_backward_magnitude(w, features, normalize, grad_rows);
  out.grad_inverse_temperature = g.grad_inverse_temperature;
  out.grad_inverse_temperature_magnitude = g.grad_inverse_temperature_magnitude;
  return out;
}

#define INFONCE_INSTANTIATE(Scalar)                                                                \
  template NtXentRowsGradient<Scalar> ntxent_loss_and_gradient(const NtXentRows<Scalar>&, double); \
  template NtXentFullBatchResult<Scalar> ntxent_full_batch(                                        \
      const Matrix<double>&, bool, const Matrix<double>&, const Matrix<double>&, double);

INFONCE_INSTANTIATE(float)
INFONCE_INSTANTIATE(double)
INFONCE_INSTANTIATE(long double)

#undef INFONCE_INSTANTIATE

}  // namespace infonce::loss
