#include "step/siglip_reference.hpp"

#include "base/assert.hpp"
#include "loss/siglip.hpp"
#include "step/tower_pair_rows.hpp"

namespace infonce::step {

namespace {

template <class Scalar>
ReferenceValues siglip_reference_in(const Case& c) {
  const SigLipSettings& siglip = *c.siglip;
  const Eigen::Index image_columns = siglip.image_features;
  const loss::ClipTowers towers{c.weight.leftCols(image_columns), siglip.image_normalize,
                                c.weight.rightCols(c.weight.cols() - image_columns),
                                siglip.text_normalize};
  const loss::SigLipLogitParameters parameters{siglip.log_scale, siglip.bias};
  const std::int32_t micro_steps = c.micro_steps_run();
  const double micro_scale = c.accumulation_normalize ? 1.0 / micro_steps : 1.0;

  ReferenceValues out;
  out.grad = Matrix<double>::Zero(c.weight.rows(), c.weight.cols());
  out.grad_magnitude = Matrix<double>::Zero(c.weight.rows(), c.weight.cols());
  INFONCE_ASSERT(direct_parameter_count(c) == 2);
  out.direct_grad.assign(2, 0.0);
  out.direct_magnitude.assign(2, 0.0);
  for (std::int32_t m = 0; m < micro_steps; ++m) {
    const auto& shards = siglip.batches[static_cast<std::size_t>(m)];
    const loss::SigLipFullBatchResult<Scalar> step =
        loss::siglip_full_batch<Scalar>(towers, tower_pair_union_rows(shards, true),
                                        tower_pair_union_rows(shards, false), parameters);
    // Each micro-step in Scalar; their sum in double.
    out.loss += static_cast<double>(static_cast<Scalar>(micro_scale) * step.loss);
    Matrix<double> grad(c.weight.rows(), c.weight.cols());
    grad << step.grad_image_weight.template cast<double>(),
        step.grad_text_weight.template cast<double>();
    Matrix<double> magnitude(c.weight.rows(), c.weight.cols());
    magnitude << step.grad_image_weight_magnitude.template cast<double>(),
        step.grad_text_weight_magnitude.template cast<double>();
    out.grad += micro_scale * grad;
    out.grad_magnitude += micro_scale * magnitude;
    out.direct_grad[0] += micro_scale * static_cast<double>(step.grad_log_scale);
    out.direct_magnitude[0] += micro_scale * static_cast<double>(step.grad_log_scale_magnitude);
    out.direct_grad[1] += micro_scale * static_cast<double>(step.grad_bias);
    out.direct_magnitude[1] += micro_scale * static_cast<double>(step.grad_bias_magnitude);
  }
  // Every rank reports the full-batch value.
  out.shard_losses.assign(static_cast<std::size_t>(c.mesh.dp), out.loss);
  return out;
}

}  // namespace

ReferenceValues compute_siglip_reference(const Case& c) {
  INFONCE_ASSERT(c.siglip.has_value());
  return c.scalar == ScalarType::float64 ? siglip_reference_in<double>(c)
                                         : siglip_reference_in<float>(c);
}

}  // namespace infonce::step
