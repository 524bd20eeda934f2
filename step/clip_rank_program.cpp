#include "step/clip_rank_program.hpp"

#include <vector>

#include "base/assert.hpp"
#include "loss/clip.hpp"
#include "loss/encoder.hpp"
#include "sim/ddp.hpp"
#include "step/flat_gradient.hpp"
#include "step/gather.hpp"
#include "step/row_bounds.hpp"
#include "step/strategy.hpp"

namespace infonce::step {
namespace {

// A tower's dL/d(gathered rows) over every role, and (local loss) the share
// of its own rows as queries, laid out over the gathered rows.
template <class Scalar>
struct TowerGradient {
  Matrix<Scalar> total;
  Matrix<Scalar> query_rows;  // local loss only
};

template <class Scalar>
TowerGradient<Scalar> tower_gradient(const Matrix<Scalar>& grad_docs,
                                     const Matrix<Scalar>& grad_queries, bool local_loss,
                                     std::int64_t own_offset) {
  TowerGradient<Scalar> out;
  if (!local_loss) {  // queries and documents are the same gathered rows
    out.total = grad_docs + grad_queries;
    return out;
  }
  INFONCE_ASSERT_ROWS(own_offset, grad_queries.rows(), grad_docs.rows());
  out.total = grad_docs;
  out.total.middleRows(own_offset, grad_queries.rows()) += grad_queries;
  out.query_rows = Matrix<Scalar>::Zero(grad_docs.rows(), grad_docs.cols());
  out.query_rows.middleRows(own_offset, grad_queries.rows()) = grad_queries;
  return out;
}

}  // namespace

template <class Scalar>
RankOutput<Scalar> run_clip_rank_program(sim::Communicator& comm, const Case& c,
                                         const StepVariant& v) {
  INFONCE_ASSERT(c.clip.has_value());
  const ClipSettings& clip = *c.clip;
  const std::int32_t world_rank = comm.world_rank();
  INFONCE_ASSERT(comm.world_size() == c.mesh.world);
  const std::int32_t dp_rank = c.mesh.dp_rank(world_rank);
  const sim::Group dp_group = comm.split(c.mesh.replica(world_rank), dp_rank);
  INFONCE_ASSERT(dp_group.size() == c.mesh.dp);

  const Eigen::Index image_columns = clip.image_features;
  const Eigen::Index text_columns = c.weight.cols() - image_columns;
  const Matrix<Scalar> image_weight = c.weight.leftCols(image_columns).cast<Scalar>();
  const Matrix<Scalar> text_weight = c.weight.rightCols(text_columns).cast<Scalar>();
  const Strategy strategy = strategy_of(c, v);
  const GatherSlots slots = gather_slots(comm, dp_group, strategy.group, c.mesh);
  const bool gather = slots.group.size() > 1;  // the CLIP family always gathers
  const GatherKind gather_kind = gather ? strategy.gather : GatherKind::detached_own_live;
  const bool local_loss = gather && strategy.scope == LossScope::local;
  const auto scale = static_cast<Scalar>(compensation_scale(c, v));
  const auto divisor = static_cast<Scalar>(accumulation_divisor(c, v));
  const loss::ClipLogitParameters parameters{clip.log_logit_scale, clip.logit_bias};
  const std::size_t direct_count = direct_parameter_count(c);

  RankOutput<Scalar> out;
  FlatGradient<Scalar> gradient(static_cast<std::size_t>(c.weight.size()), direct_count);
  Matrix<Scalar> image_storage, text_storage;  // float cases: the features cast to float
  for (std::int32_t micro = 0; micro < c.micro_steps_run(); ++micro) {
    const TowerPairBatch& batch = clip.batches[static_cast<std::size_t>(micro)][dp_rank];
    const Matrix<Scalar>& image_x = as_scalar<Scalar>(batch.image, image_storage);
    const Matrix<Scalar>& text_x = as_scalar<Scalar>(batch.text, text_storage);
    const Matrix<Scalar> image = loss::encode(image_weight, image_x, clip.image_normalize);
    const Matrix<Scalar> text = loss::encode(text_weight, text_x, clip.text_normalize);
    const AssembledRows<Scalar> images =
        local_or_gathered_rows(comm, slots.group, c, gather, image, slots.own);
    const AssembledRows<Scalar> texts =
        local_or_gathered_rows(comm, slots.group, c, gather, text, slots.own);
    INFONCE_ASSERT(images.own_offset == texts.own_offset);
    const std::int64_t own_offset = images.own_offset;

    // Global: every gathered pair a query; local: the own live rows, targets
    // at their place in the gathered batch.
    const loss::ClipRowsGradient<Scalar> result =
        local_loss ? loss::clip_loss_and_gradient<Scalar>(
                         {image, text, images.rows, texts.rows, own_offset}, parameters)
                   : loss::clip_loss_and_gradient<Scalar>(
                         {images.rows, texts.rows, images.rows, texts.rows, 0}, parameters);
    out.reported_loss += result.loss / divisor;

    const TowerGradient<Scalar> image_grad =
        tower_gradient(result.grad_image_docs, result.grad_image_queries, local_loss, own_offset);
    const TowerGradient<Scalar> text_grad =
        tower_gradient(result.grad_text_docs, result.grad_text_queries, local_loss, own_offset);
    const Matrix<Scalar> own_image =
        own_rows_gradient(comm, slots.group, gather_kind, image_grad.total,
                          local_loss ? &image_grad.query_rows : nullptr, images.slot_rows,
                          own_offset, image.rows(), slots.own);
    const Matrix<Scalar> own_text =
        own_rows_gradient(comm, slots.group, gather_kind, text_grad.total,
                          local_loss ? &text_grad.query_rows : nullptr, texts.slot_rows, own_offset,
                          text.rows(), slots.own);

    Matrix<Scalar> grad_weight(c.weight.rows(), c.weight.cols());
    grad_weight << loss::encode_backward(image_weight, image_x, clip.image_normalize, own_image),
        loss::encode_backward(text_weight, text_x, clip.text_normalize, own_text);
    grad_weight *= scale / divisor;
    const Scalar step_scale = scale / divisor;
    if (clip.logit_bias) {
      gradient.add(grad_weight,
                   {result.grad_log_scale * step_scale, result.grad_bias * step_scale});
    } else {
      gradient.add(grad_weight, {result.grad_log_scale * step_scale});
    }
  }
  out.grad = gradient.reduce(comm, dp_group, strategy.reduction);
  return out;
}

template RankOutput<double> run_clip_rank_program<double>(sim::Communicator&, const Case&,
                                                          const StepVariant&);
template RankOutput<float> run_clip_rank_program<float>(sim::Communicator&, const Case&,
                                                        const StepVariant&);

}  // namespace infonce::step
