#include "properties/properties.hpp"

#include <cmath>
#include <cstring>
#include <sstream>

#include "base/assert.hpp"
#include "base/error.hpp"
#include "loss/encoder.hpp"
#include "loss/groups.hpp"
#include "loss/infonce.hpp"
#include "loss/padding.hpp"
#include "properties/oracle_agrees.hpp"

namespace infonce::properties {

double fix_scale(const Case& c) {
  return c.loss.use_batch && c.reduction == Reduction::mean ? c.mesh.dp : 1;
}

double owed_divisor(const Case& c) {
  return c.compensate ? 1 : fix_scale(c);
}

step::CaseReport evaluate_owed(const Case& c, const step::DistributedResult& result,
                               const step::ReferenceValues& reference, CaseVerdict& verdict) {
  const double divisor = owed_divisor(c);
  if (divisor == 1) return step::evaluate(c, result, reference);
  step::ReferenceValues divided = reference;
  divided.grad /= divisor;
  divided.grad_magnitude /= divisor;
  step::CaseReport report = step::evaluate(c, result, divided);
  report.reference_divided_by = divisor;
  verdict.uncompensated_checked = true;
  return report;
}

std::string format_detail(double value) {
  std::ostringstream out;
  out.precision(6);
  out << value;
  return out.str();
}

namespace {

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
}

double max_abs(const Matrix<double>& m) {
  return m.size() == 0 ? 0.0 : m.cwiseAbs().maxCoeff();
}

// The direct parameters' part of a gradient-matches-reference failure.
std::string direct_detail(const step::CaseReport& r) {
  if (!r.direct) return {};
  const step::DirectParameterCheck& d = *r.direct;
  std::string out = "; direct parameters (";
  for (std::size_t i = 0; i < d.names.size(); ++i) out += (i > 0 ? ", " : "") + d.names[i];
  out += d.matches ? ") match" : ") differ";
  out += ", ratio " + (d.ratio ? format_detail(*d.ratio) : std::string("undefined"));
  return out;
}

void check_reference_agreement(const step::CaseReport& r, CaseVerdict& verdict) {
  if (r.loss_matches && r.grad_matches && step::direct_matches(r)) return;
  if (r.loss_matches && r.reference_divided_by > 1) {
    // A case without the fix, compared with reference / P: property 2.
    verdict.failures.push_back(
        {kUncompensatedRatio, "ratio " +
                                  (r.ratio ? format_detail(*r.ratio / r.reference_divided_by)
                                           : std::string("undefined")) +
                                  " of the reference, expected 1/" +
                                  format_detail(r.reference_divided_by) + " (scaled error " +
                                  format_detail(r.scaled_err) + ")"});
    return;
  }
  verdict.failures.push_back(
      {kGradientMatches,
       "loss " + format_detail(r.loss) + " vs reference " + format_detail(r.reference.loss) +
           ", gradient rel_err " + format_detail(r.rel_err) + " (scaled " +
           format_detail(r.scaled_err) + "), ratio " +
           (r.ratio ? format_detail(*r.ratio) : std::string("undefined")) + direct_detail(r)});
}

// Under a permuted summation order each DP group (one per replica index, with
// a summing reduction) adds its shards in its own order, so replicas may hold
// gradients that differ in the last bits, as separate NCCL all-reduces may.
// What must hold then: every rank's gradient within tolerance of rank 0's.
void relax_rank_consistency(const step::DistributedResult& run, step::CaseReport& r) {
  if (r.grads_consistent) return;
  const step::Tolerance& t = r.tolerance;
  bool close = true;
  for (const auto& grad : run.grads) {
    for (std::size_t i = 0; close && i < grad.size(); ++i) {
      const double error = std::abs(grad[i] - run.grads[0][i]);
      close = std::isfinite(error) && error <= t.atol + t.rtol * r.error_scale;
    }
  }
  r.grads_consistent = close;
  step::update_pass(r);
}

void check_rank_agreement(const step::CaseReport& r, CaseVerdict& verdict) {
  if (r.losses_equal && r.grads_consistent) return;
  std::string detail =
      r.losses_equal ? "ranks hold different reduced gradients" : "ranks report different losses:";
  if (!r.losses_equal) {
    for (std::size_t w = 0; w < r.losses.size() && w < 8; ++w) {
      detail.append(" ").append(format_detail(r.losses[w]));
    }
  }
  verdict.failures.push_back({kEqualLoss, detail});
}

void check_padding(const step::CaseReport& r, CaseVerdict& verdict) {
  if (r.padded_positives == 0) return;
  verdict.failures.push_back(
      {kPaddingSkipsPositive,
       std::to_string(r.padded_positives) + " padding rows were the group's positive"});
}

void check_schedule(const step::DistributedSetup& setup, const step::DistributedResult& fifo,
                    const PropertyOptions& property_options, CaseVerdict& verdict) {
  const std::uint64_t schedule_seed = property_options.schedule_seed;
  step::RunOptions options;
  options.schedule = {sim::ScheduleKind::random, schedule_seed};
  options.reduction_order_seed = property_options.reduction_order_seed;
  options.share_identical_losses = true;
  const step::DistributedResult other =
      step::run_on_fibers(setup.distributed_case(), setup.variant, options);
  bool same =
      same_bits(fifo.losses, other.losses) && fifo.padded_positives == other.padded_positives;
  for (std::size_t w = 0; same && w < fifo.grads.size(); ++w)
    same = same_bits(fifo.grads[w], other.grads[w]);
  if (!same) {
    verdict.failures.push_back(
        {kScheduleIndependent,
         "schedule seed " + std::to_string(schedule_seed) + " changed the results' bits"});
  }
}

// The fix's backward scale s (SPEC section 3): P with use_batch under a mean
// reduction, else 1. Without the fix the gradient is exactly reference / s.

// Property 2: without the fix, the reduced gradient is the reference / P.
void check_uncompensated(const Case& c, const step::DistributedSetup& setup,
                         const step::ReferenceValues& reference,
                         const PropertyOptions& property_options, CaseVerdict& verdict) {
  // A case without the fix is checked against reference / P directly (check_case).
  if (!c.compensate || fix_scale(c) < 2) return;
  verdict.uncompensated_checked = true;
  Case uncompensated = setup.distributed_case();
  uncompensated.compensate = false;
  step::RunOptions options;
  options.share_identical_losses = true;
  options.reduction_order_seed = property_options.reduction_order_seed;
  const step::DistributedResult result = step::run_on_fibers(uncompensated, setup.variant, options);
  const Matrix<double> grad =
      Eigen::Map<const Matrix<double>>(result.grads[0].data(), c.embedding_dim(), c.feature_dim());
  check_uncompensated_gradient(c, grad, reference, verdict);
}

}  // namespace

void check_uncompensated_gradient(const Case& c, const Matrix<double>& grad,
                                  const step::ReferenceValues& reference, CaseVerdict& verdict) {
  const Matrix<double> expected = reference.grad / static_cast<double>(c.mesh.dp);
  const step::Tolerance t = step::tolerance_for(c.scalar);
  const double scale = std::max(max_abs(expected), max_abs(reference.grad_magnitude)) / c.mesh.dp;
  const double error = max_abs(grad - expected);
  if (std::isfinite(error) && error <= t.atol + t.rtol * scale) return;
  const double ref_norm2 = reference.grad.squaredNorm();
  const double ratio = ref_norm2 > 0 ? grad.cwiseProduct(reference.grad).sum() / ref_norm2 : NAN;
  verdict.failures.push_back(
      {kUncompensatedRatio,
       "ratio " + format_detail(ratio) + ", expected 1/" + std::to_string(c.mesh.dp)});
}

namespace {

// Property 3 on micro-step 0: the union (use_batch) or shard 0, both code paths.
template <class Scalar>
void check_code_paths_in(const Case& c, CaseVerdict& verdict) {
  const auto& shards = c.batches[0];
  const std::size_t used = c.loss.use_batch ? shards.size() : 1;
  std::vector<std::int32_t> ks;
  std::int64_t rows = 0;
  for (std::size_t d = 0; d < used; ++d) {
    ks.insert(ks.end(), shards[d].negative_counts.begin(), shards[d].negative_counts.end());
    rows += shards[d].features.rows();
  }
  Matrix<double> features(rows, c.feature_dim());
  rows = 0;
  for (std::size_t d = 0; d < used; ++d) {
    features.middleRows(rows, shards[d].features.rows()) = shards[d].features;
    rows += shards[d].features.rows();
  }
  const Matrix<Scalar> embeddings =
      loss::encode<Scalar>(c.weight.cast<Scalar>(), features.cast<Scalar>(), c.encoder_normalize);
  loss::GroupLayout layout =
      loss::parse_groups(loss::labels_for_negative_counts(ks), static_cast<std::int32_t>(rows));
  if (c.loss.hard_negatives) {
    loss::GeneratedPadding padding({padding_seed_of_rank(c, 0)});
    layout = loss::resize_hard_negatives(layout, *c.loss.hard_negatives, c.loss.padding,
                                         padding.source(0, 0));
  }
  if (!loss::trainer_uses_batched_path(layout, c.loss)) return;
  verdict.code_paths_checked = true;
  const auto batched =
      loss::infonce_loss_and_gradient<Scalar>(embeddings, layout, c.loss, loss::CodePath::batched);
  const auto loop =
      loss::infonce_loss_and_gradient<Scalar>(embeddings, layout, c.loss, loss::CodePath::loop);
  // The two paths round differently, and a loss lse(z) - z_t near 0 is a
  // difference of logits of size |z| <= D m^2 / T (m: the largest embedding
  // norm): its error scales with the logits, not with the loss. So the
  // tolerance is rtol times that condition scale (and m / T more for dL/dE).
  const step::Tolerance t = step::tolerance_for(c.scalar);
  const double m = embeddings.template cast<double>().rowwise().norm().maxCoeff();
  const double logit_scale = 1.0 + c.embedding_dim() * m * m / c.loss.temperature;
  const Matrix<double> gb = batched.grad_embeddings.template cast<double>();
  const Matrix<double> gl = loop.grad_embeddings.template cast<double>();
  const double error = max_abs(gb - gl);
  const double loss_error =
      std::abs(static_cast<double>(batched.loss) - static_cast<double>(loop.loss));
  const bool loss_ok =
      (std::isinf(batched.loss) && batched.loss == loop.loss) || loss_error <= t.rtol * logit_scale;
  const double grad_bound = t.rtol * (max_abs(gl) + logit_scale * (1.0 + m / c.loss.temperature));
  if (loss_ok && std::isfinite(error) && error <= grad_bound) return;
  verdict.failures.push_back({kCodePathsAgree, "batched loss " + format_detail(batched.loss) +
                                                   " vs loop " + format_detail(loop.loss) +
                                                   ", gradient error " + format_detail(error)});
}

void check_code_paths(const Case& c, CaseVerdict& verdict) {
  if (c.scalar == ScalarType::float64) {
    check_code_paths_in<double>(c, verdict);
  } else {
    check_code_paths_in<float>(c, verdict);
  }
}

}  // namespace

std::vector<std::string> property_names() {
  return {kGradientMatches,
          kUncompensatedRatio,
          kCodePathsAgree,
          kScheduleIndependent,
          kEqualLoss,
          kPaddingSkipsPositive,
          kNoCrash,
          kOracleAgrees,
          kReferenceAcceptsValid};
}

const char* property_catching(step::CaughtBy caught_by) {
  switch (caught_by) {
    case step::CaughtBy::gradient:
      return kGradientMatches;
    case step::CaughtBy::padding:
      return kPaddingSkipsPositive;
    case step::CaughtBy::equal_loss:
      return kEqualLoss;
    case step::CaughtBy::crash:
      return kNoCrash;
  }
  INFONCE_ASSERT(false);
  return kNoCrash;
}

namespace {

// The reference rejected `c` with `reason`. A case the oracle also rejects,
// or cannot judge (a mask decision or an embedding's direction within the
// case's rounding, where the two may rightly differ), is discarded; one it
// evaluates is valid input the reference failed on.
void judge_rejection(const Case& c, const std::string& reason, OracleMode oracle,
                     CaseVerdict& verdict) {
  if (oracle != OracleMode::off) {
    verdict.rejection_checked = true;
    std::optional<OracleValues> values;
    try {
      values = oracle_values(c);
    } catch (const InputError&) {
      values.reset();  // invalid for the oracle too: a genuine discard
    }
    if (values && oracle_judges(c, *values)) {
      verdict.failures.push_back(
          {kReferenceAcceptsValid, "the reference rejects a case the oracle evaluates (loss " +
                                       format_detail(values->values.loss) + "): " + reason});
      return;
    }
  }
  verdict.discarded = true;
  verdict.discard_reason = reason;
}

}  // namespace

std::optional<step::ReferenceValues> reference_or_discard(const Case& c, OracleMode oracle,
                                                          CaseVerdict& verdict,
                                                          const ReferenceFunction& reference) {
  try {
    return reference(c);
  } catch (const InputError& e) {
    judge_rejection(c, e.what(), oracle, verdict);
    return std::nullopt;
  }
}

std::string discard_kind(const std::string& reason) {
  std::string kind;
  bool in_number = false;
  for (const char ch : reason) {
    const bool digit = ch >= '0' && ch <= '9';
    if (!digit) {
      kind += ch;
    } else if (!in_number) {
      kind += 'N';
    }
    in_number = digit;
  }
  return kind;
}

CaseVerdict check_case(const Case& c, const PropertyOptions& options) {
  CaseVerdict verdict;
  const std::optional<step::ReferenceValues> found =
      reference_or_discard(c, options.oracle, verdict);
  if (!found) return verdict;
  const step::ReferenceValues& reference = *found;
  const step::DistributedSetup setup = step::distributed_setup(c, options.mutant);
  try {
    // Ranks share a loss evaluated on bit-identical inputs; the campaign's
    // self-check reruns without sharing and compares every bit.
    step::RunOptions fifo_options;
    fifo_options.share_identical_losses = true;
    fifo_options.reduction_order_seed = options.reduction_order_seed;
    const step::DistributedResult fifo =
        step::run_on_fibers(setup.distributed_case(), setup.variant, fifo_options);
    verdict.report = evaluate_owed(c, fifo, reference, verdict);
    if (options.reduction_order_seed) relax_rank_consistency(fifo, verdict.report);
    // Most specific diagnosis first: ranks that disagree on the loss, or a
    // padded positive, also break the reference comparison.
    check_rank_agreement(verdict.report, verdict);
    check_padding(verdict.report, verdict);
    check_reference_agreement(verdict.report, verdict);
    check_schedule(setup, fifo, options, verdict);
    check_uncompensated(c, setup, reference, options, verdict);
    if (!c.clip && !c.ntxent && !c.siglip)
      check_code_paths(c, verdict);  // InfoNCE's two code paths
    if (oracle_applies(c, options.oracle, options.case_index)) {
      verdict.oracle_checked = true;
      check_oracle_agrees(c, fifo, reference, verdict);
    }
  } catch (const std::exception& e) {
    verdict.failures.push_back({kNoCrash, e.what()});
  }
  return verdict;
}

void check_reported_step(const step::CaseReport& report, CaseVerdict& verdict) {
  check_rank_agreement(report, verdict);
  check_padding(report, verdict);
  if (verdict.reference_checked) check_reference_agreement(report, verdict);
}

}  // namespace infonce::properties
