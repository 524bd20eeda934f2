// Input checks and the choice between the trainer's two code paths.
#include "loss/infonce.hpp"

#include <cmath>
#include <sstream>
#include <string>

#include "base/assert.hpp"
#include "base/error.hpp"
#include "loss/infonce_paths.hpp"

namespace infonce::loss {

namespace {

bool all_groups_same_size(const GroupLayout& layout) {
  for (std::int32_t g = 1; g < layout.group_count(); ++g) {
    if (layout.group(g).size() != layout.group(0).size()) return false;
  }
  return true;
}

std::string number(double value) {
  std::ostringstream out;
  out.precision(17);
  out << value;
  return out.str();
}

template <class Scalar>
void check_input(const Matrix<Scalar>& embeddings, const GroupLayout& layout,
                 const LossSettings& settings) {
  if (!(settings.temperature > 0) || !std::isfinite(settings.temperature)) {
    throw InputError("temperature = " + number(settings.temperature) + " must be finite and > 0");
  }
  if (settings.mask_fake_negative && !std::isfinite(settings.fake_neg_margin)) {
    throw InputError("fake_neg_margin = " + number(settings.fake_neg_margin) + " must be finite");
  }
  if (layout.group_count() == 0) {
    throw InputError("the loss needs at least one group (the batch has none)");
  }
  INFONCE_ASSERT(layout.offsets.front() == 0 &&
                 layout.offsets.back() == static_cast<std::int32_t>(layout.rows.size()));
  for (std::int32_t g = 0; g < layout.group_count(); ++g)
    INFONCE_ASSERT(layout.group(g).size() >= 2);
  for (const std::int32_t row : layout.rows) INFONCE_ASSERT(row >= 0 && row < embeddings.rows());
  if (!embeddings.allFinite()) throw InputError("embeddings must be finite");
  // |s| = |a . b| <= max ||e||^2, so a finite bound keeps every similarity and
  // logit finite: the only infinities in a logit row are masks.
  const Scalar largest = embeddings.rowwise().squaredNorm().maxCoeff();
  if (!std::isfinite(Scalar(2) * largest / static_cast<Scalar>(settings.temperature))) {
    throw InputError("embeddings too large: similarities / temperature overflow");
  }
}

template <class Scalar>
Scalar run(const Matrix<Scalar>& embeddings, const GroupLayout& layout,
           const LossSettings& settings, CodePath path, Matrix<Scalar>* grad) {
  check_input(embeddings, layout, settings);
  if (path == CodePath::automatic) {
    path = trainer_uses_batched_path(layout, settings) ? CodePath::batched : CodePath::loop;
  }
  if (path == CodePath::batched) {
    if (!all_groups_same_size(layout)) {
      throw InputError(
          "the batched code path needs every group the same size (is the layout resized for "
          "hard_negatives?)");
    }
    return detail::batched_loss(embeddings, layout, settings, grad);
  }
  return detail::loop_loss(embeddings, layout, settings, grad);
}

}  // namespace

bool trainer_uses_batched_path(const GroupLayout& layout, const LossSettings& settings) {
  // The trainer: `can_batched = hard_negatives is not None or len(set(sizes)) == 1`.
  if (layout.group_count() == 0) return false;
  return settings.hard_negatives.has_value() || all_groups_same_size(layout);
}

template <class Scalar>
Scalar infonce_loss(const Matrix<Scalar>& embeddings, const GroupLayout& layout,
                    const LossSettings& settings, CodePath path) {
  return run<Scalar>(embeddings, layout, settings, path, nullptr);
}

template <class Scalar>
LossAndGradient<Scalar> infonce_loss_and_gradient(const Matrix<Scalar>& embeddings,
                                                  const GroupLayout& layout,
                                                  const LossSettings& settings, CodePath path) {
  LossAndGradient<Scalar> result;
  result.grad_embeddings.setZero(embeddings.rows(), embeddings.cols());
  result.loss = run(embeddings, layout, settings, path, &result.grad_embeddings);
  return result;
}

template <class Scalar>
LocalLossAndGradient<Scalar> infonce_local_loss_and_gradient(const Matrix<Scalar>& embeddings,
                                                             const GroupLayout& layout,
                                                             const LossSettings& settings,
                                                             std::int32_t first_group,
                                                             std::int32_t group_count) {
  check_input(embeddings, layout, settings);
  if (!settings.use_batch) throw InputError("a local loss needs use_batch (cross-rank documents)");
  LocalLossAndGradient<Scalar> result;
  result.grad_embeddings.setZero(embeddings.rows(), embeddings.cols());
  result.grad_query_rows.setZero(embeddings.rows(), embeddings.cols());
  result.loss = detail::local_loop_loss(embeddings, layout, settings, first_group, group_count,
                                        result.grad_embeddings, result.grad_query_rows);
  return result;
}

template LocalLossAndGradient<float> infonce_local_loss_and_gradient(const Matrix<float>&,
                                                                     const GroupLayout&,
                                                                     const LossSettings&,
                                                                     std::int32_t, std::int32_t);
template LocalLossAndGradient<double> infonce_local_loss_and_gradient(const Matrix<double>&,
                                                                      const GroupLayout&,
                                                                      const LossSettings&,
                                                                      std::int32_t, std::int32_t);

#define INFONCE_INSTANTIATE(Scalar)                                                            \
  template Scalar infonce_loss(const Matrix<Scalar>&, const GroupLayout&, const LossSettings&, \
                               CodePath);                                                      \
  template LossAndGradient<Scalar> infonce_loss_and_gradient(                                  \
      const Matrix<Scalar>&, const GroupLayout&, const LossSettings&, CodePath);

INFONCE_INSTANTIATE(float)
INFONCE_INSTANTIATE(double)
INFONCE_INSTANTIATE(long double)

#undef INFONCE_INSTANTIATE

}  // namespace infonce::loss
