// The local loss of a rank (MODEL.md section 3.7): the per-group loop of
// infonce_loop.cpp restricted to the rank's own groups as logit rows, every
// group's documents (and queries) as columns, the mean over the own groups.
// Besides dl/dE over every role it keeps the part that flows through the own
// queries as logit rows (the qd and qq rows' left operand): what a rank whose
// gathered copies are all constants still differentiates, because its
// queries come from its local tensor.
#include <cstdint>
#include <vector>

#include "base/assert.hpp"
#include "loss/infonce_paths.hpp"

namespace infonce::loss::detail {

namespace {

using Eigen::Index;

template <class Scalar>
Scalar cross_entropy_row(Vector<Scalar>& logits, Index target, std::int32_t group) {
  Scalar row_max = minus_infinity<Scalar>();
  for (Index i = 0; i < logits.size(); ++i) {
    if (logits(i) > row_max) row_max = logits(i);
  }
  checked_row_max(row_max, group);
  const Scalar target_logit = logits(target) - row_max;
  Scalar sum = 0;
  for (Index i = 0; i < logits.size(); ++i) {
    logits(i) = std::exp(logits(i) - row_max);
    sum += logits(i);
  }
  logits /= sum;  // softmax - onehot: the gradient with respect to the logits
  if (std::isfinite(target_logit)) logits(target) -= Scalar(1);
  return std::log(sum) - target_logit;
}

template <class Scalar, class Segment>
void mask_strictly_above(Segment&& part, Scalar threshold) {
  for (Index i = 0; i < part.size(); ++i) {
    if (part(i) > threshold) part(i) = minus_infinity<Scalar>();
  }
}

}  // namespace

template <class Scalar>
Scalar local_loop_loss(const Matrix<Scalar>& embeddings, const GroupLayout& layout,
                       const LossSettings& settings, std::int32_t first_group,
                       std::int32_t group_count, Matrix<Scalar>& grad,
                       Matrix<Scalar>& grad_query_rows) {
  INFONCE_ASSERT(settings.use_batch);
  const std::int32_t groups = layout.group_count();
  INFONCE_ASSERT(first_group >= 0 && group_count >= 0 && first_group + group_count <= groups);
  if (group_count == 0) return 0;  // no own query: nothing to average, no gradient
  const Scalar temperature = static_cast<Scalar>(settings.temperature);
  const Scalar margin = static_cast<Scalar>(settings.fake_neg_margin);
  // Every group's [p, n..] laid end to end; doc_start[g] is p_g's position.
  std::vector<Index> doc_start;
  std::vector<std::int32_t> doc_row;
  for (std::int32_t g = 0; g < groups; ++g) {
    const auto rows = layout.group(g);
    doc_start.push_back(static_cast<Index>(doc_row.size()));
    doc_row.insert(doc_row.end(), rows.begin() + 1, rows.end());
  }
  const Index doc_count = static_cast<Index>(doc_row.size());
  const Index qq_width = settings.include_qq ? groups : 0;
  const Index dd_width = settings.include_dd ? doc_count : 0;
  const auto row_of_query = [&](Index g) {
    return embeddings.row(layout.group(static_cast<std::int32_t>(g))[0]);
  };
  const auto row_of_doc = [&](Index j) { return embeddings.row(doc_row[static_cast<std::size_t>(j)]); };

  Vector<Scalar> logits(doc_count + qq_width + dd_width);
  Scalar total = 0;
  for (std::int32_t idx = first_group; idx < first_group + group_count; ++idx) {
    const std::int32_t query_row = layout.group(idx)[0];
    const auto query = embeddings.row(query_row);
    const Index target = doc_start[static_cast<std::size_t>(idx)];
    const std::int32_t positive_row = doc_row[static_cast<std::size_t>(target)];
    const auto positive = embeddings.row(positive_row);
    auto qd = logits.head(doc_count);
    auto qq = logits.segment(doc_count, qq_width);
    auto dd = logits.tail(dd_width);
    for (Index j = 0; j < doc_count; ++j) qd(j) = ordered_dot<Scalar>(query, row_of_doc(j));
    const Scalar threshold = qd(target) + margin;  // a constant: no gradient flows through it
    if (settings.mask_fake_negative) mask_strictly_above(qd, threshold);
    if (settings.include_qq) {
      for (Index j = 0; j < groups; ++j) qq(j) = ordered_dot<Scalar>(query, row_of_query(j));
      qq(idx) = minus_infinity<Scalar>();
      if (settings.mask_fake_negative) mask_strictly_above(qq, threshold);
    }
    if (settings.include_dd) {
      for (Index j = 0; j < doc_count; ++j) dd(j) = ordered_dot<Scalar>(positive, row_of_doc(j));
      dd(target) = minus_infinity<Scalar>();
    }
    logits /= temperature;
    total += cross_entropy_row(logits, target, idx);
    logits /= static_cast<Scalar>(group_count);
    logits /= temperature;  // d loss / d similarity
    for (Index j = 0; j < doc_count; ++j) {
      if (qd(j) == 0) continue;
      grad_query_rows.row(query_row) += qd(j) * row_of_doc(j);
      grad.row(doc_row[static_cast<std::size_t>(j)]) += qd(j) * query;
    }
    if (settings.include_qq) {
      for (Index j = 0; j < groups; ++j) {
        if (qq(j) == 0) continue;
        grad_query_rows.row(query_row) += qq(j) * row_of_query(j);
        grad.row(layout.group(static_cast<std::int32_t>(j))[0]) += qq(j) * query;
      }
    }
    if (settings.include_dd) {
      for (Index j = 0; j < doc_count; ++j) {
        if (dd(j) == 0) continue;
        grad.row(positive_row) += dd(j) * row_of_doc(j);
        grad.row(doc_row[static_cast<std::size_t>(j)]) += dd(j) * positive;
      }
    }
  }
  grad += grad_query_rows;
  return total / static_cast<Scalar>(group_count);
}

template float local_loop_loss(const Matrix<float>&, const GroupLayout&, const LossSettings&,
                               std::int32_t, std::int32_t, Matrix<float>&, Matrix<float>&);
template double local_loop_loss(const Matrix<double>&, const GroupLayout&, const LossSettings&,
                                std::int32_t, std::int32_t, Matrix<double>&, Matrix<double>&);

}  // namespace infonce::loss::detail
