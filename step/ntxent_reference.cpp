#include "step/ntxent_reference.hpp"

#include "base/assert.hpp"
#include "loss/ntxent.hpp"

namespace infonce::step {

Matrix<double> ntxent_view_union(const std::vector<NtXentShardBatch>& shards, bool first) {
  Eigen::Index rows = 0;
  for (const NtXentShardBatch& shard : shards) rows += shard.first.rows();
  Matrix<double> out(rows, shards.front().first.cols());
  Eigen::Index next = 0;
  for (const NtXentShardBatch& shard : shards) {
    out.middleRows(next, shard.first.rows()) = first ? shard.first : shard.second;
    next += shard.first.rows();
  }
  return out;
}

namespace {

template <class Scalar>
ReferenceValues ntxent_reference_in(const Case& c) {
  const NtXentSettings& ntxent = *c.ntxent;
  const std::int32_t micro_steps = c.micro_steps_run();
  const double micro_scale = c.accumulation_normalize ? 1.0 / micro_steps : 1.0;
  ReferenceValues out;
  out.grad = Matrix<double>::Zero(c.weight.rows(), c.weight.cols());
  out.grad_magnitude = Matrix<double>::Zero(c.weight.rows(), c.weight.cols());
  const std::size_t direct = direct_parameter_count(c);
  out.direct_grad.assign(direct, 0.0);
  out.direct_magnitude.assign(direct, 0.0);
  for (std::int32_t m = 0; m < micro_steps; ++m) {
    const auto& shards = ntxent.batches[static_cast<std::size_t>(m)];
    const loss::NtXentFullBatchResult<Scalar> step =
        loss::ntxent_full_batch<Scalar>(c.weight, ntxent.normalize, ntxent_view_union(shards, true),
                                        ntxent_view_union(shards, false), 1.0 / ntxent.temperature);
    // Each micro-step in Scalar; their sum in double.
    out.loss += static_cast<double>(static_cast<Scalar>(micro_scale) * step.loss);
    out.grad += micro_scale * step.grad_weight.template cast<double>();
    out.grad_magnitude += micro_scale * step.grad_weight_magnitude.template cast<double>();
    if (direct == 1) {
      out.direct_grad[0] += micro_scale * static_cast<double>(step.grad_inverse_temperature);
      out.direct_magnitude[0] +=
          micro_scale * static_cast<double>(step.grad_inverse_temperature_magnitude);
    }
  }
  // Every rank reports the global value (the family always gathers).
  out.shard_losses.assign(static_cast<std::size_t>(c.mesh.dp), out.loss);
  return out;
}

}  // namespace

ReferenceValues compute_ntxent_reference(const Case& c) {
  INFONCE_ASSERT(c.ntxent.has_value());
  return c.scalar == ScalarType::float64 ? ntxent_reference_in<double>(c)
                                         : ntxent_reference_in<float>(c);
}

}  // namespace infonce::step
