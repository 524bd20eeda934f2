// The trainer's per-group loop branch: groups may differ in size; each group
// builds its own logit vector and adds its cross-entropy to the total.
#include <cstdint>
#include <vector>

#include "base/assert.hpp"
#include "loss/infonce_paths.hpp"

namespace infonce::loss::detail {

namespace {

using Eigen::Index;

// Cross-entropy of logits[0..count) with `target`. With `want_grad`, logits
// is overwritten with softmax - onehot; a masked (-inf) target has no -1 term.
template <class Scalar>
Scalar row_cross_entropy(Scalar* logits, Index count, Index target, std::int32_t group,
                         bool want_grad) {
  Scalar row_max = minus_infinity<Scalar>();
  for (Index i = 0; i < count; ++i) {
    if (logits[i] > row_max) row_max = logits[i];
  }
  checked_row_max(row_max, group);
  const Scalar target_logit = logits[target] - row_max;
  Scalar sum = 0;
  for (Index i = 0; i < count; ++i) {
    logits[i] = std::exp(logits[i] - row_max);
    sum += logits[i];
  }
  if (want_grad) {
    for (Index i = 0; i < count; ++i) logits[i] /= sum;
    if (std::isfinite(target_logit)) logits[target] -= Scalar(1);
  }
  return std::log(sum) - target_logit;
}

// use_batch = false: group g's logits are q_g . [p_g, n_g..] / T, target 0.
template <class Scalar>
Scalar within_groups(const Matrix<Scalar>& embeddings, const GroupLayout& layout,
                     const LossSettings& settings, Matrix<Scalar>* grad) {
  const Scalar temperature = static_cast<Scalar>(settings.temperature);
  const std::int32_t groups = layout.group_count();
  std::vector<Scalar> logits;
  Scalar total = 0;
  for (std::int32_t g = 0; g < groups; ++g) {
    const auto rows = layout.group(g);
    const auto query = embeddings.row(rows[0]);
    const Index docs = static_cast<Index>(rows.size()) - 1;
    logits.resize(static_cast<std::size_t>(docs));
    for (Index j = 0; j < docs; ++j) {
      logits[static_cast<std::size_t>(j)] =
          ordered_dot<Scalar>(query, embeddings.row(rows[j + 1])) / temperature;
    }
    total += row_cross_entropy(logits.data(), docs, 0, g, grad != nullptr);
    if (grad == nullptr) continue;
    for (Index j = 0; j < docs; ++j) {
      const Scalar coef =
          logits[static_cast<std::size_t>(j)] / static_cast<Scalar>(groups) / temperature;
      grad->row(rows[0]) += coef * embeddings.row(rows[j + 1]);
      grad->row(rows[j + 1]) += coef * query;
    }
  }
  return total / static_cast<Scalar>(groups);
}

// The trainer's `torch.cat([t[1:] for t in split_tensors])`: every group's
// [p, n..] laid end to end; doc_start[g] is where p_g sits (the target).
template <class Scalar>
struct Documents {
  Matrix<Scalar> docs;
  Matrix<Scalar> queries;
  std::vector<Index> doc_start;
};

template <class Scalar>
Documents<Scalar> gather_documents(const Matrix<Scalar>& embeddings, const GroupLayout& layout) {
  const std::int32_t groups = layout.group_count();
  Documents<Scalar> gathered;
  gathered.docs.resize(static_cast<Index>(layout.rows.size()) - groups, embeddings.cols());
  gathered.queries.resize(groups, embeddings.cols());
  gathered.doc_start.reserve(static_cast<std::size_t>(groups));
  Index length = 0;
  for (std::int32_t g = 0; g < groups; ++g) {
    const auto rows = layout.group(g);
    gathered.queries.row(g) = embeddings.row(rows[0]);
    gathered.doc_start.push_back(length);
    for (std::size_t j = 1; j < rows.size(); ++j)
      gathered.docs.row(length++) = embeddings.row(rows[j]);
  }
  INFONCE_ASSERT(length == gathered.docs.rows());
  return gathered;
}

// Sets every entry of `part` strictly above `threshold` to -inf.
template <class Scalar, class Segment>
void mask_above(Segment&& part, Scalar threshold) {
  for (Index i = 0; i < part.size(); ++i) {
    if (part(i) > threshold) part(i) = minus_infinity<Scalar>();
  }
}

// use_batch = true: group idx's logits are
// [q . docs (masked) | q . queries (self -inf, masked) | p . docs (own p -inf)] / T.
template <class Scalar>
Scalar across_groups(const Matrix<Scalar>& embeddings, const GroupLayout& layout,
                     const LossSettings& settings, Matrix<Scalar>* grad) {
  const Scalar temperature = static_cast<Scalar>(settings.temperature);
  const Scalar margin = static_cast<Scalar>(settings.fake_neg_margin);
  const std::int32_t groups = layout.group_count();
  const Documents<Scalar> gathered = gather_documents(embeddings, layout);
  const Matrix<Scalar>& docs = gathered.docs;
  const Matrix<Scalar>& queries = gathered.queries;
  const Index doc_count = docs.rows();
  const Index qq_width = settings.include_qq ? groups : 0;
  const Index dd_width = settings.include_dd ? doc_count : 0;

  Vector<Scalar> logits(doc_count + qq_width + dd_width);
  Matrix<Scalar> grad_docs;
  Matrix<Scalar> grad_queries;
  if (grad != nullptr) {
    grad_docs.setZero(doc_count, docs.cols());
    grad_queries.setZero(groups, docs.cols());
  }
  Scalar total = 0;
  for (std::int32_t idx = 0; idx < groups; ++idx) {
    const auto query = queries.row(idx);
    const Index target = gathered.doc_start[static_cast<std::size_t>(idx)];
    const auto positive = docs.row(target);
    auto qd = logits.head(doc_count);
    auto qq = logits.segment(doc_count, qq_width);
    auto dd = logits.tail(dd_width);
    for (Index j = 0; j < doc_count; ++j) qd(j) = ordered_dot<Scalar>(query, docs.row(j));
    const Scalar threshold = qd(target) + margin;  // a constant: no gradient flows through it
    if (settings.mask_fake_negative) mask_above(qd, threshold);
    if (settings.include_qq) {
      for (Index j = 0; j < groups; ++j) qq(j) = ordered_dot<Scalar>(query, queries.row(j));
      qq(idx) = minus_infinity<Scalar>();
      if (settings.mask_fake_negative) mask_above(qq, threshold);
    }
    if (settings.include_dd) {
      for (Index j = 0; j < doc_count; ++j) dd(j) = ordered_dot<Scalar>(positive, docs.row(j));
      dd(target) = minus_infinity<Scalar>();
    }
    logits /= temperature;
    total += row_cross_entropy(logits.data(), logits.size(), target, idx, grad != nullptr);
    if (grad == nullptr) continue;

    logits /= static_cast<Scalar>(groups);
    logits /= temperature;  // d loss / d similarity
    grad_queries.row(idx).noalias() += qd.transpose() * docs;
    grad_docs.noalias() += qd * query;
    if (settings.include_qq) {
      grad_queries.row(idx).noalias() += qq.transpose() * queries;
      grad_queries.noalias() += qq * query;
    }
    if (settings.include_dd) {
      grad_docs.row(target).noalias() += dd.transpose() * docs;
      grad_docs.noalias() += dd * positive;
    }
  }
  if (grad != nullptr) {
    for (std::int32_t g = 0; g < groups; ++g) {
      const auto rows = layout.group(g);
      grad->row(rows[0]) += grad_queries.row(g);
      const Index start = gathered.doc_start[static_cast<std::size_t>(g)];
      for (std::size_t j = 1; j < rows.size(); ++j) {
        grad->row(rows[j]) += grad_docs.row(start + static_cast<Index>(j) - 1);
      }
    }
  }
  return total / static_cast<Scalar>(groups);
}

}  // namespace

template <class Scalar>
Scalar loop_loss(const Matrix<Scalar>& embeddings, const GroupLayout& layout,
                 const LossSettings& settings, Matrix<Scalar>* grad) {
  return settings.use_batch ? across_groups(embeddings, layout, settings, grad)
                            : within_groups(embeddings, layout, settings, grad);
}

template float loop_loss(const Matrix<float>&, const GroupLayout&, const LossSettings&,
                         Matrix<float>*);
template double loop_loss(const Matrix<double>&, const GroupLayout&, const LossSettings&,
                          Matrix<double>*);
template long double loop_loss(const Matrix<long double>&, const GroupLayout&, const LossSettings&,
                               Matrix<long double>*);

}  // namespace infonce::loss::detail
