#include "step/siglip_rank_program.hpp"

#include <vector>

#include "base/assert.hpp"
#include "loss/encoder.hpp"
#include "loss/siglip.hpp"
#include "step/flat_gradient.hpp"
#include "step/gather.hpp"

namespace infonce::step {
namespace {

// The gradient a tower's own rows receive from dL/d(rows of every slot).
template <class Scalar>
Matrix<Scalar> own_tower_gradient(sim::Communicator& comm, const sim::Group& group,
                                  SigLipTransport transport, GatherKind kind,
                                  const Matrix<Scalar>& grad_rows,
                                  const AssembledRows<Scalar>& rows, std::int32_t own_slot,
                                  Eigen::Index own_rows) {
  switch (kind) {
    case GatherKind::detached_own_live:
      return grad_rows.middleRows(rows.own_offset, own_rows);
    case GatherKind::detached:
      return Matrix<Scalar>::Zero(own_rows, grad_rows.cols());
    case GatherKind::autograd:
      return returned_gradient(comm, group, transport, grad_rows, rows.slot_rows, own_slot);
  }
  INFONCE_ASSERT(false);
  return {};
}

// The rank's own rows as the only slot (a group of one: nothing travels).
template <class Scalar>
AssembledRows<Scalar> own_only(const Matrix<Scalar>& local) {
  AssembledRows<Scalar> out;
  out.rows = local;
  out.slot_rows = {local.rows()};
  return out;
}

}  // namespace

template <class Scalar>
RankOutput<Scalar> run_siglip_rank_program(sim::Communicator& comm, const Case& c,
                                           const StepVariant& v) {
  INFONCE_ASSERT(c.siglip.has_value());
  const SigLipSettings& siglip = *c.siglip;
  const std::int32_t world_rank = comm.world_rank();
  INFONCE_ASSERT(comm.world_size() == c.mesh.world);
  const std::int32_t dp_rank = c.mesh.dp_rank(world_rank);
  const sim::Group dp_group = comm.split(c.mesh.replica(world_rank), dp_rank);
  INFONCE_ASSERT(dp_group.size() == c.mesh.dp);

  const Eigen::Index image_columns = siglip.image_features;
  const Eigen::Index text_columns = c.weight.cols() - image_columns;
  const Matrix<Scalar> image_weight = c.weight.leftCols(image_columns).cast<Scalar>();
  const Matrix<Scalar> text_weight = c.weight.rightCols(text_columns).cast<Scalar>();
  const Strategy strategy = strategy_of(c, v);
  const GatherSlots slots = gather_slots(comm, dp_group, strategy.group, c.mesh);
  const bool travel = slots.group.size() > 1;
  const GatherKind kind = travel ? strategy.gather : GatherKind::detached_own_live;
  const bool local_loss = travel && strategy.scope == LossScope::local;
  const SigLipTransport transport = v.siglip_transport;
  const auto scale = static_cast<Scalar>(compensation_scale(c, v));
  const auto divisor = static_cast<Scalar>(accumulation_divisor(c, v));
  const loss::SigLipLogitParameters parameters{siglip.log_scale, siglip.bias};

  RankOutput<Scalar> out;
  FlatGradient<Scalar> gradient(static_cast<std::size_t>(c.weight.size()), 2);
  Matrix<Scalar> image_storage, text_storage;  // float cases: the features cast to float
  for (std::int32_t micro = 0; micro < c.micro_steps_run(); ++micro) {
    const TowerPairBatch& batch = siglip.batches[static_cast<std::size_t>(micro)][dp_rank];
    const Matrix<Scalar>& image_x = as_scalar<Scalar>(batch.image, image_storage);
    const Matrix<Scalar>& text_x = as_scalar<Scalar>(batch.text, text_storage);
    const Matrix<Scalar> image = loss::encode(image_weight, image_x, siglip.image_normalize);
    const Matrix<Scalar> text = loss::encode(text_weight, text_x, siglip.text_normalize);
    const AssembledRows<Scalar> texts =
        travel ? exchange_rows(comm, slots.group, transport, c.gather, text, slots.own)
               : own_only(text);
    // A local loss scores only the own images: they never travel.
    const AssembledRows<Scalar> images =
        travel && !local_loss
            ? exchange_rows(comm, slots.group, transport, c.gather, image, slots.own)
            : own_only(image);
    INFONCE_ASSERT(local_loss || images.own_offset == texts.own_offset);

    const loss::SigLipRowsGradient<Scalar> result = loss::siglip_loss_and_gradient<Scalar>(
        {images.rows, texts.rows, local_loss ? texts.own_offset : 0}, parameters);
    out.reported_loss += result.loss / divisor;

    const Matrix<Scalar> own_image =
        local_loss ? result.grad_images
                   : own_tower_gradient(comm, slots.group, transport, kind, result.grad_images,
                                        images, slots.own, image.rows());
    const Matrix<Scalar> own_text = own_tower_gradient(
        comm, slots.group, transport, kind, result.grad_texts, texts, slots.own, text.rows());

    Matrix<Scalar> grad_weight(c.weight.rows(), c.weight.cols());
    grad_weight << loss::encode_backward(image_weight, image_x, siglip.image_normalize, own_image),
        loss::encode_backward(text_weight, text_x, siglip.text_normalize, own_text);
    const Scalar step_scale = scale / divisor;
    grad_weight *= step_scale;
    gradient.add(grad_weight, {result.grad_log_scale * step_scale, result.grad_bias * step_scale});
  }
  if (travel && transport != SigLipTransport::gather && transport != SigLipTransport::reduce) {
    comm.check_messages_delivered();
  }
  out.grad = gradient.reduce(comm, dp_group, strategy.reduction);
  return out;
}

template RankOutput<double> run_siglip_rank_program<double>(sim::Communicator&, const Case&,
                                                            const StepVariant&);
template RankOutput<float> run_siglip_rank_program<float>(sim::Communicator&, const Case&,
                                                          const StepVariant&);

}  // namespace infonce::step
