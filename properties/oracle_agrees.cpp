#include "properties/oracle_agrees.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "base/assert.hpp"
#include "base/error.hpp"
#include "properties/oracle_case.hpp"
#include "step/tolerance.hpp"

namespace infonce::properties {
namespace {

double max_abs(const Matrix<double>& m) {
  return m.size() == 0 ? 0.0 : m.cwiseAbs().maxCoeff();
}

double unit_roundoff_of(const Case& c) {
  return c.scalar == ScalarType::float64 ? 0x1p-53 : 0x1p-24;
}

// The largest relative error of an embedding's direction that the code
// under test's rounding of W x allows (oracle::encoding_condition).
double encoding_direction_error(const Case& c, const OracleValues& oracle) {
  return c.feature_dim() * unit_roundoff_of(c) * oracle.max_encoding_condition;
}

// How far the code under test's rounding can move a CLIP or SigLIP logit
// z = c a . b + bias (0 for the other families: max_logit_magnitude is 0):
// W x rounds each embedding entry by up to F u |W| |x| (F: both towers'
// features together), each normalisation (a D-term norm, its square root, a
// division) by about (D / 2 + 2) u of it, the D-term dot product by D u of
// sum_k |a_k| |b_k|, and exp(log_scale), the product, the bias and the sum
// by u each: in all at most (F + 2 D + 8) u of c sum_k m_k n_k + |bias|
// (oracle::max_logit_magnitude). This is not a multiple of |z|: a dot
// product of large, nearly orthogonal rows, or a bias that cancels c a . b,
// leaves |z| small and its rounding as large as its terms.
double logit_rounding(const Case& c, const OracleValues& oracle) {
  const double terms = static_cast<double>(c.feature_dim() + 2 * c.embedding_dim() + 8);
  return terms * unit_roundoff_of(c) * oracle.max_logit_magnitude;
}

// The campaign's tolerance (SPEC section 6, scaled by the summands), plus
// what the oracle's extra precision exposes: the code under test rounds each
// logit z, which moves the loss by about u |z| and the gradient by about
// u |z| times its scale (u: the unit roundoff of the case's dtype; the
// factor 32 covers exp's error on z - max z and the row sums: with 16, one
// float32 case of 500,000 typical ones used 1.13 of the tolerance). For
// float64 that term is below 1e-14 relative and rtol decides; for float32
// it is what the campaign's rtol 1e-5 already allows for. And the
// encoder's rounding: an embedding whose features nearly cancel has its
// direction off by up to delta (encoding_direction_error); each logit then
// moves by at most 2 delta (|s| / T + 1 / T) and the gradient by a few delta
// of its scale. For typical features delta is far below rtol.
// CLIP and SigLIP add what rounds with the size of a logit's terms rather
// than with |z| (logit_rounding), and sums over all N^2 pairs (summation).
struct OracleTolerance {
  double loss_atol;
  double loss_summation;  // relative: the loss's sum of nonnegative terms
  double rtol;
  double atol;
  double grad_scale;
  double rounding;  // the logits' and the embeddings' rounding

  OracleTolerance(const Case& c, const OracleValues& oracle) {
    const step::Tolerance t = step::tolerance_for(c.scalar);
    const double u = unit_roundoff_of(c);
    const double logit = logit_rounding(c, oracle);
    const double conditioning = 32 * u * (1 + oracle.max_abs_logit) + logit;
    const double direction = encoding_direction_error(c, oracle);
    // Each logit's rounding moves the loss by |d loss / d z| times it: at
    // most logit_gradient_bound in all (N for SigLIP, whose N^2 terms weigh
    // 1 / N each; 1 where the oracle does not count it).
    loss_atol = t.atol + conditioning + logit * std::max(0.0, oracle.logit_gradient_bound - 1) +
                4 * direction * (oracle.max_abs_logit + oracle.logit_factor);
    // Any order of adding n nonnegative terms rounds by at most n u of their
    // sum, which is the loss (every CLIP row's cross-entropy and every SigLIP
    // softplus is >= 0, and so is every micro-step's weight).
    loss_summation = oracle.loss_terms * u;
    rtol = t.rtol;
    atol = t.atol;
    grad_scale = std::max(max_abs(oracle.values.grad), max_abs(oracle.values.grad_magnitude));
    rounding = conditioning * max_abs(oracle.grad_bound) + 4 * direction * grad_scale;
    const std::vector<double>& direct = oracle.values.direct_grad;
    INFONCE_ASSERT(oracle.direct_is_log_scale.size() == direct.size());
    for (std::size_t i = 0; i < direct.size(); ++i) {
      const double scale = std::max(std::abs(direct[i]), oracle.values.direct_magnitude[i]);
      // A direct gradient adds direct_terms terms: at most that many u of
      // the sum of their sizes (direct_magnitude) apart in any order.
      double allowance = atol + rtol * scale + conditioning * oracle.direct_bound[i] +
                         4 * direction * scale + oracle.direct_terms * u * scale;
      // A log scale's terms are d loss / d z times c a . b = z - bias, itself
      // rounded by up to logit_rounding: at most that times the sum of
      // |d loss / d z|.
      if (oracle.direct_is_log_scale[i]) allowance += logit * oracle.logit_gradient_bound;
      direct_allowance.push_back(allowance);
    }
  }
  // Per direct parameter, what a value may differ from the oracle's by.
  std::vector<double> direct_allowance;
  // The allowance of two independent roundings (the reference's and a step's).
  OracleTolerance doubled() const {
    OracleTolerance t = *this;
    t.loss_atol = 2 * loss_atol;
    t.loss_summation = 2 * loss_summation;
    t.rtol = 2 * rtol;
    t.atol = 2 * atol;
    t.rounding = 2 * rounding;
    for (double& allowance : t.direct_allowance) allowance *= 2;
    return t;
  }
  // Empty when every direct parameter's gradient is within its allowance.
  std::string direct_difference(const std::vector<std::string>& names,
                                const std::vector<double>& direct,
                                const std::vector<double>& oracle) const {
    INFONCE_ASSERT(direct.size() == oracle.size() && oracle.size() == direct_allowance.size());
    for (std::size_t i = 0; i < direct.size(); ++i) {
      const double error = std::abs(direct[i] - oracle[i]);
      if (std::isfinite(error) && error <= direct_allowance[i]) continue;
      return "d/d" + names[i] + " " + format_detail(direct[i]) + " differs from the oracle's " +
             format_detail(oracle[i]);
    }
    return {};
  }
  double direct_fraction(const std::vector<double>& direct,
                         const std::vector<double>& oracle) const {
    double used = 0;
    for (std::size_t i = 0; i < direct.size() && i < oracle.size(); ++i) {
      const double error = std::abs(direct[i] - oracle[i]);
      used = std::max(used, std::isfinite(error) ? error / direct_allowance[i] : INFINITY);
    }
    return used;
  }
  // What a finite loss may differ from the oracle's `oracle` by.
  double loss_allowance(double oracle) const {
    return loss_atol + (rtol + loss_atol + loss_summation) * std::abs(oracle);
  }
  bool loss_close(double value, double oracle) const {
    if (std::isinf(value) || std::isinf(oracle)) return value == oracle;
    return std::abs(value - oracle) <= loss_allowance(oracle);
  }
  double loss_fraction(double value, double oracle) const {
    if (std::isinf(value) || std::isinf(oracle)) return value == oracle ? 0 : INFINITY;
    return std::abs(value - oracle) / loss_allowance(oracle);
  }
  // What a gradient's entry may differ from the oracle's by.
  double grad_allowance() const { return atol + rtol * grad_scale + rounding; }
  double grad_fraction(const Matrix<double>& grad, const Matrix<double>& oracle) const {
    const double error = max_abs(grad - oracle);
    return std::isfinite(error) ? error / grad_allowance() : INFINITY;
  }
  // Empty when `grad` is within tolerance of the oracle's.
  std::string grad_difference(const Matrix<double>& grad, const Matrix<double>& oracle) const {
    if (grad.rows() != oracle.rows() || grad.cols() != oracle.cols()) return "has the wrong shape";
    const double error = max_abs(grad - oracle);
    if (std::isfinite(error) && error <= grad_allowance()) return {};
    return "differs from the oracle's by " + format_detail(error) + " (scaled " +
           format_detail(grad_scale > 0 ? error / grad_scale : error) + ")";
  }
};

// What a step owes of the oracle's values: a step without the fix owes the
// gradient / P (property 2), as evaluate_owed divides the reference.
OracleValues owed_oracle(const Case& c, const OracleValues& oracle) {
  const double divisor = owed_divisor(c);
  OracleValues owed = oracle;
  owed.values.grad /= divisor;
  owed.values.grad_magnitude /= divisor;
  owed.grad_bound /= divisor;
  return owed;
}

// Empty when the loss/ reference agrees with the oracle, else what differs.
std::string reference_disagreement(const Case& c, const step::ReferenceValues& reference,
                                   const OracleValues& oracle, const OracleTolerance& t) {
  const step::ReferenceValues& o = oracle.values;
  if (!t.loss_close(reference.loss, o.loss)) {
    return "reference loss " + format_detail(reference.loss) + " vs oracle " +
           format_detail(o.loss);
  }
  for (std::size_t d = 0; d < o.shard_losses.size(); ++d) {
    if (d >= reference.shard_losses.size() ||
        !t.loss_close(reference.shard_losses[d], o.shard_losses[d])) {
      return "reference loss of shard " + std::to_string(d) + " differs from the oracle's " +
             format_detail(o.shard_losses[d]);
    }
  }
  const std::string grad = t.grad_difference(reference.grad, o.grad);
  if (!grad.empty()) return "reference gradient " + grad;
  const std::string direct =
      t.direct_difference(direct_parameter_names(c), reference.direct_grad, o.direct_grad);
  return direct.empty() ? direct : "reference " + direct;
}

// Empty when every rank's loss and the reduced gradient agree with the oracle.
std::string step_disagreement(const Case& c, const step::DistributedResult& distributed,
                              const OracleValues& oracle, const OracleTolerance& t) {
  const step::ReferenceValues& o = oracle.values;
  // evaluate() reads the step's result in the campaign's terms (rank 0's
  // reduced gradient, every rank's loss); its verdict is against `o` here.
  const step::CaseReport judged = step::evaluate(c, distributed, o);
  for (std::size_t w = 0; w < judged.losses.size(); ++w) {
    const double expected = c.loss.use_batch ? o.loss
                                             : o.shard_losses[static_cast<std::size_t>(
                                                   c.mesh.dp_rank(static_cast<std::int32_t>(w)))];
    if (!t.loss_close(judged.losses[w], expected)) {
      return "step loss on rank " + std::to_string(w) + " " + format_detail(judged.losses[w]) +
             " vs oracle " + format_detail(expected);
    }
  }
  const std::string grad = t.grad_difference(judged.grad, o.grad);
  if (!grad.empty()) return "step gradient " + grad;
  if (!judged.direct) return {};
  const std::string direct =
      t.direct_difference(judged.direct->names, judged.direct->grad, o.direct_grad);
  return direct.empty() ? direct : "step " + direct;
}

}  // namespace

double tolerance_used(const Case& c, const step::ReferenceValues& values,
                      const OracleValues& oracle) {
  const OracleTolerance t(c, oracle);
  double used = std::max({t.loss_fraction(values.loss, oracle.values.loss),
                          t.grad_fraction(values.grad, oracle.values.grad),
                          t.direct_fraction(values.direct_grad, oracle.values.direct_grad)});
  for (std::size_t d = 0; d < oracle.values.shard_losses.size() && d < values.shard_losses.size();
       ++d) {
    used = std::max(used, t.loss_fraction(values.shard_losses[d], oracle.values.shard_losses[d]));
  }
  return used;
}

namespace {

// A mask decision closer than the code under test rounds a similarity: the
// embedding's normalisation and a D-term dot product, each a few units of
// roundoff per term (256 D u leaves a wide margin; the generator's collinear,
// duplicated and threshold-tie features land on exact ties, at gap 0 in
// exact arithmetic).
// The gap is relative to the similarities' rounding scale (sum |a_k b_k|), so
// this holds for small similarities too, and for float32 as for float64 (issue
// 30: float32 cases with the mask are judged). An embedding's direction off
// by delta (encoding_direction_error) moves a similarity by up to 2 delta of
// that scale, the threshold as much again.
bool mask_near_tie(const Case& c, const OracleValues& oracle) {
  const double rounding = 256.0 * static_cast<double>(c.embedding_dim()) * unit_roundoff_of(c);
  return oracle.min_mask_gap < rounding + 4 * encoding_direction_error(c, oracle);
}

// An embedding whose direction the case's precision cannot pin down to a
// thousandth (features that cancel to nearly zero, or exactly zero from
// nonzero terms): any direction is right for that precision, so no
// tolerance of the oracle's would mean anything.
bool encoding_undetermined(const Case& c, const OracleValues& oracle) {
  return !(encoding_direction_error(c, oracle) <= 1e-3);
}

}  // namespace

bool oracle_judges(const Case& c, const OracleValues& oracle) {
  return !mask_near_tie(c, oracle) && !encoding_undetermined(c, oracle);
}

std::optional<OracleValues> judging_oracle(const Case& c, CaseVerdict& verdict) {
  OracleValues oracle;
  try {
    oracle = oracle_values(c);
  } catch (const InputError& e) {
    // An exact tie can mask every logit of a row on one side of the rounding.
    if (!c.loss.mask_fake_negative) {
      verdict.failures.push_back(
          {kOracleAgrees,
           std::string("the reference accepted a case the oracle rejects: ") + e.what()});
    }
    return std::nullopt;
  }
  if (!oracle_judges(c, oracle)) return std::nullopt;
  return oracle;
}

void check_oracle_agrees(const Case& c, const step::DistributedResult& distributed,
                         const step::ReferenceValues& reference, const OracleValues& oracle,
                         CaseVerdict& verdict) {
  verdict.oracle_checked = true;
  const OracleTolerance tolerance(c, oracle);
  std::string detail = reference_disagreement(c, reference, oracle, tolerance);
  if (detail.empty()) {
    // A step without the fix owes the oracle's gradient / P (property 2).
    const OracleValues owed = owed_oracle(c, oracle);
    detail = step_disagreement(c, distributed, owed, OracleTolerance(c, owed));
  }
  if (!detail.empty()) verdict.failures.push_back({kOracleAgrees, detail});
}

void check_oracle_agrees(const Case& c, const step::DistributedResult& distributed,
                         const step::ReferenceValues& reference, CaseVerdict& verdict) {
  const std::size_t failures_before = verdict.failures.size();
  const std::optional<OracleValues> oracle = judging_oracle(c, verdict);
  if (oracle) {
    check_oracle_agrees(c, distributed, reference, *oracle, verdict);
  } else {
    // Checked only where the oracle rejected what the reference accepted.
    verdict.oracle_checked = verdict.failures.size() > failures_before;
  }
}

void admit_own_rounding(const Case& c, const OracleValues& oracle, step::CaseReport& report) {
  const OracleTolerance t(c, owed_oracle(c, oracle));
  // Twice the allowance: one for the reference's rounding, one for the step's.
  const OracleTolerance twice = t.doubled();
  report.loss_matches = true;
  for (std::size_t w = 0; w < report.losses.size(); ++w) {
    const double expected = c.loss.use_batch
                                ? report.reference.loss
                                : report.reference.shard_losses[static_cast<std::size_t>(
                                      c.mesh.dp_rank(static_cast<std::int32_t>(w)))];
    report.loss_matches = report.loss_matches && twice.loss_close(report.losses[w], expected);
  }
  report.grad_matches = twice.grad_difference(report.grad, report.reference.grad).empty();
  if (report.direct) {
    report.direct->matches = twice
                                 .direct_difference(report.direct->names, report.direct->grad,
                                                    report.reference.direct_grad)
                                 .empty();
  }
  // The error is shown against the scale this allowance stands for: a
  // saturated softmax's gradient can be all rounding (0 against 3e-8).
  report.error_scale = std::max(report.error_scale, t.grad_scale + t.rounding / t.rtol);
  report.scaled_err = report.max_abs_err / report.error_scale;
  step::update_pass(report);
}

}  // namespace infonce::properties

namespace infonce::properties {

std::int64_t oracle_work(const Case& c) {
  const std::int64_t dim = c.embedding_dim();
  std::int64_t work = 0;
  if (c.siglip) {  // per micro-step: both towers' rows, and N^2 logits
    for (const auto& shards : c.siglip->batches) {
      std::int64_t pairs = 0;
      for (const SigLipShardBatch& shard : shards) pairs += shard.image.rows();
      work += pairs * dim * c.feature_dim() + pairs * pairs * dim;
    }
    return work;
  }
  if (c.clip) {  // per micro-step: both towers' rows, and N^2 logits in each direction
    for (const auto& shards : c.clip->batches) {
      std::int64_t pairs = 0;
      for (const ClipShardBatch& shard : shards) pairs += shard.image.rows();
      work += pairs * dim * c.feature_dim() + 2 * pairs * pairs * dim;
    }
    return work;
  }
  if (c.ntxent) {  // per micro-step: 2N rows encoded, (2N)^2 logits
    for (const auto& shards : c.ntxent->batches) {
      std::int64_t rows = 0;
      for (const NtXentShardBatch& shard : shards) rows += 2 * shard.first.rows();
      work += rows * dim * c.feature_dim() + rows * rows * dim;
    }
    return work;
  }
  for (const auto& shards : c.batches) {
    std::int64_t groups = 0, docs = 0, rows = 0;
    for (const loss::ShardBatch& shard : shards) {
      rows += shard.features.rows();
      for (const std::int32_t k : shard.negative_counts) {
        ++groups;
        docs += 1 + (c.loss.hard_negatives ? *c.loss.hard_negatives : k);
      }
    }
    work += rows * dim * c.feature_dim();
    if (!c.loss.use_batch) {
      work += docs * dim;
      continue;
    }
    const std::int64_t row_length =
        docs + (c.loss.include_qq ? groups : 0) + (c.loss.include_dd ? docs : 0);
    work += groups * row_length * dim;
  }
  return work;
}

bool oracle_applies(const Case& c, OracleMode mode, std::int64_t case_index) {
  // Float32 cases with the fake-negative mask run too: a mask decision within
  // float32's rounding of the threshold (seed 1 typical case 7774: the target
  // kept in float32, masked in long double) is a near tie, counted and not
  // judged (oracle_judges); every other decision is the same in both precisions.
  switch (mode) {
    case OracleMode::every:
      return true;
    case OracleMode::off:
      return false;
    case OracleMode::sampled:
      return oracle_work(c) <= kOracleWorkBound || case_index % kOracleSampleEvery == 0;
  }
  return true;
}

}  // namespace infonce::properties
