#include "step/run_case.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/assert.hpp"
#include "loss/reference.hpp"
#include "step/clip_reference.hpp"
#include "step/ntxent_reference.hpp"
#include "step/rank_program.hpp"
#include "step/siglip_reference.hpp"

namespace infonce::step {
namespace {

template <class Scalar>
ReferenceValues reference_in(const Case& c) {
  const auto padding = reference_padding(c);
  const auto result = loss::compute_reference<Scalar>(reference_problem(c), *padding);
  padding->check_all_used();
  ReferenceValues out;
  out.loss = static_cast<double>(result.loss);
  out.shard_losses.assign(result.shard_losses.begin(), result.shard_losses.end());
  out.grad = result.grad.template cast<double>();
  out.grad_magnitude = result.grad_magnitude.template cast<double>();
  out.direct_grad.assign(result.direct_grad.begin(), result.direct_grad.end());
  out.direct_magnitude.assign(result.direct_magnitude.begin(), result.direct_magnitude.end());
  return out;
}

template <class Scalar>
DistributedResult fibers_in(const Case& c, const StepVariant& variant, const RunOptions& options) {
  const std::int32_t world = c.mesh.world;
  std::vector<RankOutput<Scalar>> outputs(static_cast<std::size_t>(world));
  sim::SimulationOptions sim_options;
  sim_options.world_size = world;
  sim_options.schedule = options.schedule;
  sim_options.reduction_order_seed = options.reduction_order_seed;
  SharedLosses<Scalar> shared;
  SharedLosses<Scalar>* sharing = options.share_identical_losses ? &shared : nullptr;
  sim::run_fibers(sim_options, [&](sim::Communicator& comm) {
    outputs[static_cast<std::size_t>(comm.world_rank())] =
        run_rank_program<Scalar>(comm, c, variant, sharing);
  });
  DistributedResult result;
  result.losses.reserve(outputs.size());
  result.grads.reserve(outputs.size());
  for (const auto& rank : outputs) {
    result.losses.push_back(static_cast<double>(rank.reported_loss));
    result.grads.emplace_back(rank.grad.begin(), rank.grad.end());
    result.padded_positives += rank.padded_positives;
  }
  return result;
}

double max_abs(const Matrix<double>& m) {
  return m.size() == 0 ? 0.0 : m.cwiseAbs().maxCoeff();
}

// Equal bits, NaN included: the schedule-independence claim is about bits.
bool same_bits(double a, double b) {
  return std::memcmp(&a, &b, sizeof(double)) == 0;
}

// The direct parameters' gradients on rank 0 (after W's D x F entries)
// against the reference, within the tolerance of each entry's scale.
DirectParameterCheck check_direct(const Case& c, const std::vector<double>& flat,
                                  const ReferenceValues& reference, const Tolerance& tolerance) {
  DirectParameterCheck check;
  check.names = direct_parameter_names(c);
  const std::size_t count = check.names.size();
  const auto weight_entries = static_cast<std::size_t>(c.weight.size());
  INFONCE_ASSERT(flat.size() == weight_entries + count);
  INFONCE_ASSERT(reference.direct_grad.size() == count);
  check.grad.assign(flat.begin() + static_cast<std::ptrdiff_t>(weight_entries), flat.end());
  double dot = 0;
  double ref_norm2 = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const double ref = reference.direct_grad[i];
    const double error = std::abs(check.grad[i] - ref);
    const double scale = std::max(std::abs(ref), reference.direct_magnitude[i]);
    check.max_abs_err = std::max(check.max_abs_err, error);
    check.error_scale = std::max(check.error_scale, scale);
    check.matches =
        check.matches && std::isfinite(error) && error <= tolerance.atol + tolerance.rtol * scale;
    dot += check.grad[i] * ref;
    ref_norm2 += ref * ref;
  }
  if (ref_norm2 > 0) check.ratio = dot / ref_norm2;
  return check;
}

ExpectCheck check_expect(const Expectation& e, double loss, const Matrix<double>& grad) {
  ExpectCheck check;
  const Tolerance t{e.rtol, e.atol};
  check.loss_error = std::abs(loss - e.loss);
  const bool loss_ok = scalar_close(loss, e.loss, t);
  bool grad_ok = grad.rows() == e.grad.rows() && grad.cols() == e.grad.cols();
  if (grad_ok) {
    check.grad_error = max_abs(grad - e.grad);
    grad_ok = check.grad_error <= t.atol + t.rtol * max_abs(e.grad);
  } else {
    check.grad_error = std::numeric_limits<double>::infinity();
  }
  check.met = loss_ok && grad_ok;
  return check;
}

}  // namespace

ReferenceValues compute_case_reference(const Case& c) {
  if (c.clip) return compute_clip_reference(c);
  if (c.ntxent) return compute_ntxent_reference(c);
  if (c.siglip) return compute_siglip_reference(c);
  return c.scalar == ScalarType::float64 ? reference_in<double>(c) : reference_in<float>(c);
}

DistributedResult run_on_fibers(const Case& c, const StepVariant& variant,
                                const RunOptions& options) {
  return c.scalar == ScalarType::float64 ? fibers_in<double>(c, variant, options)
                                         : fibers_in<float>(c, variant, options);
}

CaseReport evaluate(const Case& c, const DistributedResult& distributed,
                    const ReferenceValues& reference) {
  INFONCE_ASSERT(!distributed.losses.empty());
  CaseReport report;
  report.tolerance = tolerance_for(c.scalar);
  report.losses = distributed.losses;
  report.loss = distributed.losses[0];
  report.grad = Eigen::Map<const Matrix<double>>(distributed.grads[0].data(), c.embedding_dim(),
                                                 c.feature_dim());
  report.reference = reference;
  report.padded_positives = distributed.padded_positives;

  for (std::size_t w = 0; w < distributed.losses.size(); ++w) {
    report.grads_consistent = report.grads_consistent &&
                              std::equal(distributed.grads[w].begin(), distributed.grads[w].end(),
                                         distributed.grads[0].begin(), same_bits);
    // With use_batch every rank computes the one global loss; without it the
    // replicas of a DP shard still hold the same data and must agree.
    const auto rank = static_cast<std::int32_t>(w);
    const std::size_t peer =
        c.loss.use_batch ? 0 : static_cast<std::size_t>(rank - c.mesh.replica(rank));
    report.losses_equal =
        report.losses_equal && same_bits(distributed.losses[w], distributed.losses[peer]);
    const double expected = c.loss.use_batch ? reference.loss
                                             : reference.shard_losses[static_cast<std::size_t>(
                                                   c.mesh.dp_rank(static_cast<std::int32_t>(w)))];
    report.loss_matches =
        report.loss_matches && scalar_close(distributed.losses[w], expected, report.tolerance);
  }

  const double ref_scale = max_abs(reference.grad);
  report.error_scale = std::max(ref_scale, max_abs(reference.grad_magnitude));
  report.max_abs_err = max_abs(report.grad - reference.grad);
  report.rel_err = ref_scale > 0 ? report.max_abs_err / ref_scale : report.max_abs_err;
  report.scaled_err =
      report.error_scale > 0 ? report.max_abs_err / report.error_scale : report.max_abs_err;
  report.grad_matches =
      std::isfinite(report.max_abs_err) &&
      report.max_abs_err <= report.tolerance.atol + report.tolerance.rtol * report.error_scale;
  const double ref_norm2 = reference.grad.squaredNorm();
  if (ref_norm2 > 0) report.ratio = report.grad.cwiseProduct(reference.grad).sum() / ref_norm2;

  if (direct_parameter_count(c) > 0) {
    report.direct = check_direct(c, distributed.grads[0], reference, report.tolerance);
  }
  update_pass(report);
  if (c.expect) {
    report.expect = check_expect(*c.expect, report.loss, report.grad);
    if (!c.expect->direct.empty() && report.direct) {
      const Tolerance t{c.expect->rtol, c.expect->atol};
      for (std::size_t i = 0; i < c.expect->direct.size(); ++i) {
        const double error = std::abs(report.direct->grad[i] - c.expect->direct[i]);
        report.expect->grad_error = std::max(report.expect->grad_error, error);
        report.expect->met = report.expect->met && std::isfinite(error) &&
                             error <= t.atol + t.rtol * std::abs(c.expect->direct[i]);
      }
    }
  }
  return report;
}

DistributedSetup::DistributedSetup(const Case& c, const Mutant* mutant) : original_(&c) {
  if (mutant == nullptr) return;
  mutated_ = c;
  mutant->apply(*mutated_, variant);
}

CaseReport run_case(const Case& c, const Mutant* mutant, const RunOptions& options) {
  const ReferenceValues reference = compute_case_reference(c);
  const DistributedSetup setup = distributed_setup(c, mutant);
  return evaluate(c, run_on_fibers(setup.distributed_case(), setup.variant, options), reference);
}

}  // namespace infonce::step
