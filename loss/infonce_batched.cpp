// The trainer's batched InfoNCE branch: every group has the same size, so the
// groups stack into a query matrix Q (B x D) and a document matrix Docs
// ((B * (k + 1)) x D), and the loss is a handful of matrix products.
#include <cstdint>

#include "base/assert.hpp"
#include "loss/infonce_paths.hpp"

namespace infonce::loss::detail {

namespace {

using Eigen::Index;

template <class Scalar>
using StridedRows = Eigen::Map<Matrix<Scalar>, 0, Eigen::OuterStride<>>;

template <class Scalar>
struct Stacked {
  Index groups = 0;
  Index docs_per_group = 0;  // k + 1: the positive and the negatives
  Matrix<Scalar> queries;    // B x D
  Matrix<Scalar> docs;  // (B * docs_per_group) x D, group g's block starts at g * docs_per_group
};

template <class Scalar>
Stacked<Scalar> stack_groups(const Matrix<Scalar>& embeddings, const GroupLayout& layout) {
  Stacked<Scalar> stacked;
  stacked.groups = layout.group_count();
  stacked.docs_per_group = static_cast<Index>(layout.group(0).size()) - 1;
  const Index dim = embeddings.cols();
  stacked.queries.resize(stacked.groups, dim);
  stacked.docs.resize(stacked.groups * stacked.docs_per_group, dim);
  for (Index g = 0; g < stacked.groups; ++g) {
    const auto rows = layout.group(static_cast<std::int32_t>(g));
    INFONCE_ASSERT(static_cast<Index>(rows.size()) == stacked.docs_per_group + 1);
    stacked.queries.row(g) = embeddings.row(rows[0]);
    for (Index j = 0; j < stacked.docs_per_group; ++j) {
      stacked.docs.row(g * stacked.docs_per_group + j) = embeddings.row(rows[j + 1]);
    }
  }
  return stacked;
}

// Document j of every group: rows j, j + (k+1), j + 2(k+1), ... of a stacked
// document matrix, as a B x D view (j = 0: the positives).
template <class Scalar>
StridedRows<Scalar> doc_of_every_group(Matrix<Scalar>& docs, Index docs_per_group, Index j) {
  return StridedRows<Scalar>(docs.data() + j * docs.cols(), docs.rows() / docs_per_group,
                             docs.cols(), Eigen::OuterStride<>(docs_per_group * docs.cols()));
}

// Mean over rows of the cross-entropy of `logits` with target column
// g * target_stride in row g. With `want_grad`, logits is overwritten with
// d(mean)/d(logits) = (softmax - onehot) / B; a masked (-inf) target has no
// -1 term (the trainer masks it in place, so no gradient reaches it).
template <class Scalar>
Scalar mean_cross_entropy(Matrix<Scalar>& logits, Index target_stride, bool want_grad) {
  const Index groups = logits.rows();
  const Vector<Scalar> row_max = logits.rowwise().maxCoeff();
  for (Index g = 0; g < groups; ++g) checked_row_max(row_max(g), static_cast<std::int32_t>(g));
  logits.colwise() -= row_max;
  Vector<Scalar> target_logit(groups);
  for (Index g = 0; g < groups; ++g) target_logit(g) = logits(g, g * target_stride);
  // Masked entries are -inf and must give exactly 0 (Eigen's vectorised exp
  // clamps its argument and would give ~1e-308).
  logits =
      (logits.array() == minus_infinity<Scalar>()).select(Scalar(0), logits.array().exp()).matrix();
  const Vector<Scalar> sums = logits.rowwise().sum();
  Scalar total = 0;
  for (Index g = 0; g < groups; ++g) total += std::log(sums(g)) - target_logit(g);
  if (want_grad) {
    logits.array().colwise() /= sums.array();
    for (Index g = 0; g < groups; ++g) {
      if (std::isfinite(target_logit(g))) logits(g, g * target_stride) -= Scalar(1);
    }
    logits /= static_cast<Scalar>(groups);
  }
  return total / static_cast<Scalar>(groups);
}

// Adds the stacked gradients back onto the embedding rows they came from.
template <class Scalar>
void scatter(const GroupLayout& layout, const Stacked<Scalar>& stacked,
             const Matrix<Scalar>& grad_queries, const Matrix<Scalar>& grad_docs,
             Matrix<Scalar>& grad) {
  for (Index g = 0; g < stacked.groups; ++g) {
    const auto rows = layout.group(static_cast<std::int32_t>(g));
    grad.row(rows[0]) += grad_queries.row(g);
    for (Index j = 0; j < stacked.docs_per_group; ++j) {
      grad.row(rows[j + 1]) += grad_docs.row(g * stacked.docs_per_group + j);
    }
  }
}

// use_batch = false: group g's logits are q_g . [p_g, n_g..] / T, target 0.
template <class Scalar>
Scalar within_groups(Stacked<Scalar>& stacked, const LossSettings& settings,
                     Matrix<Scalar>& grad_queries, Matrix<Scalar>& grad_docs, bool want_grad) {
  const Scalar temperature = static_cast<Scalar>(settings.temperature);
  const Index per_group = stacked.docs_per_group;
  Matrix<Scalar> logits(stacked.groups, per_group);
  for (Index j = 0; j < per_group; ++j) {
    const auto doc_j = doc_of_every_group(stacked.docs, per_group, j);
    for (Index g = 0; g < stacked.groups; ++g) {
      logits(g, j) = ordered_dot<Scalar>(stacked.queries.row(g), doc_j.row(g)) / temperature;
    }
  }
  const Scalar loss = mean_cross_entropy(logits, 0, want_grad);
  if (!want_grad) return loss;
  logits /= temperature;  // d loss / d similarity
  grad_queries.setZero(stacked.groups, stacked.queries.cols());
  grad_docs.resize(stacked.docs.rows(), stacked.docs.cols());
  for (Index j = 0; j < per_group; ++j) {
    const auto doc_j = doc_of_every_group(stacked.docs, per_group, j);
    grad_queries.noalias() += logits.col(j).asDiagonal() * doc_j;
    doc_of_every_group(grad_docs, per_group, j).noalias() =
        logits.col(j).asDiagonal() * stacked.queries;
  }
  return loss;
}

// Sets entries of `block` strictly greater than their row's threshold to -inf.
template <class Scalar, class Block>
void mask_above(Block&& block, const Vector<Scalar>& threshold) {
  const Index cols = block.cols();
  block = (block.array() > threshold.replicate(1, cols).array())
              .select(minus_infinity<Scalar>(), block.array())
              .matrix();
}

// use_batch = true: logit row g is [q_g . docs | q_g . queries | p_g . docs] / T.
template <class Scalar>
Scalar across_groups(Stacked<Scalar>& stacked, const LossSettings& settings,
                     Matrix<Scalar>& grad_queries, Matrix<Scalar>& grad_docs, bool want_grad) {
  const Scalar temperature = static_cast<Scalar>(settings.temperature);
  const Index groups = stacked.groups;
  const Index per_group = stacked.docs_per_group;
  const Index doc_count = stacked.docs.rows();
  const Index qq_width = settings.include_qq ? groups : 0;
  const Index dd_width = settings.include_dd ? doc_count : 0;
  const auto& queries = stacked.queries;
  const auto& docs = stacked.docs;
  const auto positives = doc_of_every_group(stacked.docs, per_group, 0);

  Matrix<Scalar> sims(groups, doc_count + qq_width + dd_width);
  auto qd = sims.leftCols(doc_count);
  auto qq = sims.middleCols(doc_count, qq_width);
  auto dd = sims.rightCols(dd_width);
  ordered_products<Scalar>(qd, queries, docs);
  if (settings.include_qq) {
    ordered_products<Scalar>(qq, queries, queries);
    qq.diagonal().setConstant(minus_infinity<Scalar>());
  }
  if (settings.include_dd) {
    ordered_products<Scalar>(dd, positives, docs);
    for (Index g = 0; g < groups; ++g) dd(g, g * per_group) = minus_infinity<Scalar>();
  }
  if (settings.mask_fake_negative) {
    // The threshold is a constant: computed from raw similarities, before / T.
    Vector<Scalar> threshold(groups);
    for (Index g = 0; g < groups; ++g) {
      threshold(g) = qd(g, g * per_group) + static_cast<Scalar>(settings.fake_neg_margin);
    }
    mask_above(qd, threshold);
    if (settings.include_qq) mask_above(qq, threshold);
  }
  sims /= temperature;
  const Scalar loss = mean_cross_entropy(sims, per_group, want_grad);
  if (!want_grad) return loss;

  sims /= temperature;  // d loss / d similarity
  const auto grad_qd = sims.leftCols(doc_count);
  grad_queries.noalias() = grad_qd * docs;
  grad_docs.noalias() = grad_qd.transpose() * queries;
  if (settings.include_qq) {
    const auto grad_qq = sims.middleCols(doc_count, qq_width);
    grad_queries.noalias() += grad_qq * queries;
    grad_queries.noalias() += grad_qq.transpose() * queries;
  }
  auto grad_positives = doc_of_every_group(grad_docs, per_group, 0);
  if (settings.include_dd) {
    const auto grad_dd = sims.rightCols(dd_width);
    grad_docs.noalias() += grad_dd.transpose() * positives;
    grad_positives.noalias() += grad_dd * docs;
  }
  return loss;
}

}  // namespace

template <class Scalar>
Scalar batched_loss(const Matrix<Scalar>& embeddings, const GroupLayout& layout,
                    const LossSettings& settings, Matrix<Scalar>* grad) {
  Stacked<Scalar> stacked = stack_groups(embeddings, layout);
  Matrix<Scalar> grad_queries;
  Matrix<Scalar> grad_docs;
  const bool want_grad = grad != nullptr;
  const Scalar loss = settings.use_batch
                          ? across_groups(stacked, settings, grad_queries, grad_docs, want_grad)
                          : within_groups(stacked, settings, grad_queries, grad_docs, want_grad);
  if (want_grad) scatter(layout, stacked, grad_queries, grad_docs, *grad);
  return loss;
}

template float batched_loss(const Matrix<float>&, const GroupLayout&, const LossSettings&,
                            Matrix<float>*);
template double batched_loss(const Matrix<double>&, const GroupLayout&, const LossSettings&,
                             Matrix<double>*);
template long double batched_loss(const Matrix<long double>&, const GroupLayout&,
                                  const LossSettings&, Matrix<long double>*);

}  // namespace infonce::loss::detail
