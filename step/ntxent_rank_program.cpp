#include "step/ntxent_rank_program.hpp"

#include <vector>

#include "base/assert.hpp"
#include "loss/encoder.hpp"
#include "loss/ntxent.hpp"
#include "step/flat_gradient.hpp"
#include "step/gather.hpp"
#include "step/row_bounds.hpp"
#include "step/strategy.hpp"

namespace infonce::step {
namespace {

// The rank's queries and their positions among the 2N keys. Global: every
// key is a query. Local: its own n first views (keys own_offset + i, positive
// N + own_offset + i), then its own n second views.
template <class Scalar>
struct Queries {
  Matrix<Scalar> rows;
  std::vector<loss::NtXentQuery> positions;
};

template <class Scalar>
Queries<Scalar> local_queries(const Matrix<Scalar>& first, const Matrix<Scalar>& second,
                              Eigen::Index samples, std::int64_t own_offset) {
  const Eigen::Index n = first.rows();
  Queries<Scalar> out;
  out.rows.resize(2 * n, first.cols());
  out.rows << first, second;
  for (Eigen::Index i = 0; i < n; ++i)
    out.positions.push_back({own_offset + i, samples + own_offset + i});
  for (Eigen::Index i = 0; i < n; ++i)
    out.positions.push_back({samples + own_offset + i, own_offset + i});
  return out;
}

// One view's dL/d(gathered rows) over every role, and (local loss) the share
// of its own rows as queries, laid out over that view's gathered rows.
template <class Scalar>
struct ViewGradient {
  Matrix<Scalar> total;
  Matrix<Scalar> query_rows;  // local loss only
};

template <class Scalar>
ViewGradient<Scalar> view_gradient(const Matrix<Scalar>& grad_keys,
                                   const Matrix<Scalar>& grad_own_queries, bool local_loss,
                                   std::int64_t own_offset) {
  ViewGradient<Scalar> out;
  out.total = grad_keys;
  if (!local_loss) return out;  // the caller added the query roles already
  INFONCE_ASSERT_ROWS(own_offset, grad_own_queries.rows(), grad_keys.rows());
  out.total.middleRows(own_offset, grad_own_queries.rows()) += grad_own_queries;
  out.query_rows = Matrix<Scalar>::Zero(grad_keys.rows(), grad_keys.cols());
  out.query_rows.middleRows(own_offset, grad_own_queries.rows()) = grad_own_queries;
  return out;
}

}  // namespace

template <class Scalar>
RankOutput<Scalar> run_ntxent_rank_program(sim::Communicator& comm, const Case& c,
                                           const StepVariant& v) {
  INFONCE_ASSERT(c.ntxent.has_value());
  const NtXentSettings& ntxent = *c.ntxent;
  const std::int32_t world_rank = comm.world_rank();
  INFONCE_ASSERT(comm.world_size() == c.mesh.world);
  const std::int32_t dp_rank = c.mesh.dp_rank(world_rank);
  const sim::Group dp_group = comm.split(c.mesh.replica(world_rank), dp_rank);
  INFONCE_ASSERT(dp_group.size() == c.mesh.dp);

  const Matrix<Scalar> weight = c.weight.cast<Scalar>();
  const Strategy strategy = strategy_of(c, v);
  const GatherSlots slots = gather_slots(comm, dp_group, strategy.group, c.mesh);
  const bool gather = slots.group.size() > 1;  // the family always gathers
  const GatherKind gather_kind = gather ? strategy.gather : GatherKind::detached_own_live;
  const bool local_loss = gather && strategy.scope == LossScope::local;
  const auto scale = static_cast<Scalar>(compensation_scale(c, v));
  const auto divisor = static_cast<Scalar>(accumulation_divisor(c, v));
  const double tau = 1.0 / ntxent.temperature;

  RankOutput<Scalar> out;
  FlatGradient<Scalar> gradient(static_cast<std::size_t>(c.weight.size()),
                                direct_parameter_count(c));
  Matrix<Scalar> first_storage, second_storage;  // float cases: the features cast to float
  for (std::int32_t micro = 0; micro < c.micro_steps_run(); ++micro) {
    const NtXentShardBatch& batch = ntxent.batches[static_cast<std::size_t>(micro)][dp_rank];
    const Matrix<Scalar>& first_x = as_scalar<Scalar>(batch.first, first_storage);
    const Matrix<Scalar>& second_x = as_scalar<Scalar>(batch.second, second_storage);
    const Matrix<Scalar> first = loss::encode(weight, first_x, ntxent.normalize);
    const Matrix<Scalar> second = loss::encode(weight, second_x, ntxent.normalize);
    const AssembledRows<Scalar> firsts =
        local_or_gathered_rows(comm, slots.group, c, gather, first, slots.own);
    const AssembledRows<Scalar> seconds =
        local_or_gathered_rows(comm, slots.group, c, gather, second, slots.own);
    INFONCE_ASSERT(firsts.own_offset == seconds.own_offset);
    const std::int64_t own_offset = firsts.own_offset;
    const Eigen::Index samples = firsts.rows.rows();
    Matrix<Scalar> keys(2 * samples, weight.rows());
    keys << firsts.rows, seconds.rows;

    const Queries<Scalar> queries =
        local_loss ? local_queries(first, second, samples, own_offset)
                   : Queries<Scalar>{keys, loss::ntxent_global_queries(samples)};
    const loss::NtXentRowsGradient<Scalar> result =
        loss::ntxent_loss_and_gradient<Scalar>({queries.rows, keys, queries.positions}, tau);
    out.reported_loss += result.loss / divisor;

    // Global: queries are the keys, so both roles add up over the gathered rows.
    const Matrix<Scalar> grad_keys =
        local_loss ? result.grad_keys : Matrix<Scalar>(result.grad_keys + result.grad_queries);
    const Eigen::Index n = first.rows();
    const ViewGradient<Scalar> first_grad = view_gradient<Scalar>(
        grad_keys.topRows(samples), result.grad_queries.topRows(n), local_loss, own_offset);
    const ViewGradient<Scalar> second_grad = view_gradient<Scalar>(
        grad_keys.bottomRows(samples),
        local_loss ? Matrix<Scalar>(result.grad_queries.bottomRows(n)) : Matrix<Scalar>(),
        local_loss, own_offset);
    const Matrix<Scalar> own_first = own_rows_gradient(
        comm, slots.group, gather_kind, first_grad.total,
        local_loss ? &first_grad.query_rows : nullptr, firsts.slot_rows, own_offset, n, slots.own);
    const Matrix<Scalar> own_second =
        own_rows_gradient(comm, slots.group, gather_kind, second_grad.total,
                          local_loss ? &second_grad.query_rows : nullptr, seconds.slot_rows,
                          own_offset, n, slots.own);

    Matrix<Scalar> grad_weight =
        loss::encode_backward(weight, first_x, ntxent.normalize, own_first) +
        loss::encode_backward(weight, second_x, ntxent.normalize, own_second);
    const Scalar step_scale = scale / divisor;
    grad_weight *= step_scale;
    if (c.learnable_temperature) {
      gradient.add(grad_weight, {result.grad_inverse_temperature * step_scale});
    } else {
      gradient.add(grad_weight, {});
    }
  }
  out.grad = gradient.reduce(comm, dp_group, strategy.reduction);
  return out;
}

template RankOutput<double> run_ntxent_rank_program<double>(sim::Communicator&, const Case&,
                                                            const StepVariant&);
template RankOutput<float> run_ntxent_rank_program<float>(sim::Communicator&, const Case&,
                                                          const StepVariant&);

}  // namespace infonce::step
