#include "properties/sut_step.hpp"

#include <algorithm>
#include <cmath>
#include <exception>
#include <thread>
#include <utility>

#include "base/assert.hpp"
#include "base/error.hpp"
#include "properties/oracle_agrees.hpp"
#include "properties/point_comparison.hpp"
#include "step/run_case.hpp"

namespace infonce::properties {
namespace {

template <class T>
bool has(const std::vector<T>& values, const T& value) {
  return std::find(values.begin(), values.end(), value) != values.end();
}

template <class T>
std::optional<T> only(const std::vector<T>& values) {
  INFONCE_ASSERT(!values.empty());
  return values.size() == 1 ? std::optional<T>(values.front()) : std::nullopt;
}

// [micro][world rank] -> [micro][dp shard]: the draws of each shard's first
// replica (world rank d * R), which the reference pads with.
loss::RecordedDraws first_replica_draws(const loss::RecordedDraws& draws, const Mesh& mesh) {
  loss::RecordedDraws out;
  for (const auto& micro : draws) {
    auto& shards = out.emplace_back();
    for (std::int32_t d = 0; d < mesh.dp; ++d) {
      shards.push_back(micro[static_cast<std::size_t>(d * mesh.replicas())]);
    }
  }
  return out;
}

// Legacy padding takes row j + 1 of [q, p, n_1..n_k]: a draw j = 0 is the
// positive. Fixed padding takes row j + 2, never the positive.
std::int64_t padded_positives(const loss::RecordedDraws& draws, loss::Padding padding) {
  if (padding != loss::Padding::legacy) return 0;
  std::int64_t count = 0;
  for (const auto& micro : draws) {
    for (const auto& rank : micro) count += std::count(rank.begin(), rank.end(), 0);
  }
  return count;
}

// JSON has no infinity: a SUT reports a non-finite loss as null (NaN here),
// which stands for the reference's value when that is not finite either.
void read_null_losses(std::vector<double>& losses, const Case& c,
                      const step::ReferenceValues& reference) {
  for (std::size_t w = 0; w < losses.size(); ++w) {
    const double expected = c.loss.use_batch ? reference.loss
                                             : reference.shard_losses[static_cast<std::size_t>(
                                                   c.mesh.dp_rank(static_cast<std::int32_t>(w)))];
    if (std::isnan(losses[w]) && !std::isfinite(expected)) losses[w] = expected;
  }
}

std::vector<double> flat(const Matrix<double>& m) {
  return {m.data(), m.data() + m.size()};
}

step::DistributedResult distributed_result(const sut::StepResult& r, const Case& c,
                                           const step::ReferenceValues& reference) {
  step::DistributedResult d;
  d.losses = r.losses;
  read_null_losses(d.losses, c, reference);
  for (std::int32_t w = 0; w < c.mesh.world; ++w) {
    d.grads.push_back(flat(r.grads ? (*r.grads)[static_cast<std::size_t>(w)] : r.grad));
  }
  // The harness reads rank 0's gradient as `grad`: the response's `grad`.
  d.grads[0] = flat(r.grad);
  // Every rank's flat gradient ends with the direct parameters' (rank 0's:
  // the response gives one value each).
  for (auto& grad : d.grads) grad.insert(grad.end(), r.direct.begin(), r.direct.end());
  if (r.padding_draws) d.padded_positives = padded_positives(*r.padding_draws, c.loss.padding);
  return d;
}

}  // namespace

Restriction restriction_of(const sut::Supports& s) {
  if (!has(s.rng_modes, RngMode::synced)) {
    throw InputError(
        "--sut: handshake.supports.rng_modes: lacks \"synced\", which every generated case uses");
  }
  Restriction r;
  r.compensate_false = s.compensate_false;
  // A key beyond the case file's first version: sent only where declared.
  r.partial_window = s.declares("accumulation.window");
  r.use_batch = only(s.use_batch);
  r.accumulation_normalize = only(s.accumulation_normalize);
  r.reduction = only(s.reductions);
  r.gather = only(s.gathers);
  // float32 cases carry the extension key "dtype": only for a SUT that declares it.
  r.scalar = s.declares("dtype") ? only(s.dtypes) : std::optional(ScalarType::float64);
  if (r.scalar && !has(s.dtypes, *r.scalar)) {
    throw InputError(
        "--sut: handshake.supports.dtypes: float32 only, but \"dtype\" is not among its "
        "extension_keys");
  }
  r.hard_negatives = s.hard_negatives;
  r.mask_fake_negative = s.mask_fake_negative;
  r.include_qq = s.include_qq;
  r.include_dd = s.include_dd;
  r.max_world = s.max_world;
  r.max_replicas = s.max_replicas;
  r.min_dim = s.min_dim;
  r.padding = has(s.padding, loss::Padding::fixed) ? loss::Padding::fixed : loss::Padding::legacy;
  r.unequal_batches = s.unequal_batches;
  r.unequal_documents = s.unequal_documents;
  r.unequal_shapes = s.unequal_shapes;
  r.per_rank_rng = has(s.rng_modes, RngMode::per_rank);
  // A CLIP case carries the extension key "family": only for a SUT that declares it.
  // A SUT that runs both families gets InfoNCE cases, as before CLIP was a family: a
  // case without a strategy key runs the trainer's own point, which is P x the
  // reference on CLIP's logit scale (docs/strategies.md); CLIP is judged there by
  // check --strategies. A CLIP-only SUT gets CLIP cases.
  r.infonce = s.infonce_family;
  r.clip = s.clip_family && s.declares("family") && !s.infonce_family;
  // The same for NT-Xent: an NT-Xent SUT that runs no InfoNCE gets NT-Xent cases
  // at the trainer's own point (correct for the encoder with the fix).
  r.ntxent = s.ntxent_family && s.declares("family") && !s.infonce_family;
  // And for SigLIP (SPEC section 15).
  r.siglip = s.siglip_family && s.declares("family") && !s.infonce_family;
  r.logit_bias = s.logit_bias;
  if (!r.infonce && !r.clip && !r.ntxent && !r.siglip) {
    throw InputError(
        "--sut: handshake.supports.families: no InfoNCE, but \"family\" is not among its "
        "extension_keys");
  }
  return r;
}

std::vector<std::string> handshake_notes(const sut::Supports& s) {
  if (!s.rank_local_loss) return {};
  return {
      "reported loss: rank-local (each rank's loss against the reference's loss over its own "
      "rows: the mean, or sum, of its groups' terms of the global loss)"};
}

namespace {

// The SUT rounds in its own order, not in the reference's: where the
// campaign's fixed tolerance rejects its result, it is judged within the
// rounding the oracle bounds for each of them (admit_own_rounding), and not at
// all where the oracle does not judge the case (a mask decision or an
// embedding's direction within rounding: both results are right for their
// precision). The oracle's values are computed only where needed.
void judge_against_reference(const Case& c, const step::DistributedResult& distributed,
                             const step::ReferenceValues& reference, const PropertyOptions& options,
                             CaseVerdict& verdict) {
  const bool strict_match = verdict.report.loss_matches && verdict.report.grad_matches;
  const bool oracle_on = oracle_applies(c, options.oracle, options.case_index);
  if (strict_match && !oracle_on) return;
  const std::size_t failures_before = verdict.failures.size();
  const std::optional<OracleValues> oracle = judging_oracle(c, verdict);
  if (!strict_match) {
    if (oracle) {
      admit_own_rounding(c, *oracle, verdict.report);
    } else {
      verdict.reference_checked = false;
    }
  }
  if (!oracle_on) return;
  if (oracle) {
    check_oracle_agrees(c, distributed, reference, *oracle, verdict);
  } else {
    verdict.oracle_checked = verdict.failures.size() > failures_before;
  }
}

// Property 2 on the SUT: its run with compensate false against its own
// compensated gradient / P, so that only the ratio is judged.
void check_sut_uncompensated(const Case& judged, sut::Session& session,
                             const step::ReferenceValues& reference, CaseVerdict& verdict) {
  verdict.uncompensated_checked = true;
  Case uncompensated = judged;
  uncompensated.compensate = false;
  const sut::StepOutcome before_fix = session.run(uncompensated);
  if (!before_fix.result) {
    verdict.failures.push_back({kNoCrash, "with compensate false: " + before_fix.failure});
    return;
  }
  step::ReferenceValues own = reference;
  own.grad = verdict.report.grad;
  check_uncompensated_gradient(judged, before_fix.result->grad, own, verdict);
}

// A rank-local reported loss (reported_loss "rank-local"): every rank's loss
// against the reference's loss over that rank's own rows. The losses are
// then replaced by the reference's, so that the rest is judged as for a
// global loss (the gradient).
void judge_rank_local_losses(const Case& c, const step::ReferenceValues& reference,
                             step::DistributedResult& distributed, CaseVerdict& verdict) {
  const std::vector<double> expected = rank_local_losses(c);
  const PointAllowance allowance = point_allowance(c, reference);
  for (std::size_t w = 0; w < expected.size(); ++w) {
    if (losses_agree(distributed.losses[w], expected[w], allowance)) continue;
    verdict.failures.push_back(
        {kGradientMatches, "rank " + std::to_string(w) + " reports the rank-local loss " +
                               format_detail(distributed.losses[w]) +
                               ", the reference's loss over its own rows is " +
                               format_detail(expected[w])});
    break;
  }
  for (std::int32_t w = 0; w < c.mesh.world; ++w) {
    const auto shard = static_cast<std::size_t>(c.mesh.dp_rank(w));
    distributed.losses[static_cast<std::size_t>(w)] =
        c.loss.use_batch ? reference.loss : reference.shard_losses[shard];
  }
}

}  // namespace

namespace {

// The reference of a case that will be sent: nullopt (and `verdict` says why)
// if the case is discarded instead.
std::optional<step::ReferenceValues> reference_to_send(const Case& c, const sut::Supports& supports,
                                                       const PropertyOptions& options,
                                                       CaseVerdict& verdict) {
  std::optional<step::ReferenceValues> found = reference_or_discard(c, options.oracle, verdict);
  if (!found) return std::nullopt;
  if (const auto axis = sut::outside_supports(c, supports)) {
    // Generation stays inside the handshake; a case that does not is never sent.
    verdict.discarded = true;
    verdict.discard_reason = "outside the SUT's handshake (" + *axis + "): not sent";
    return std::nullopt;
  }
  return found;
}

}  // namespace

CaseVerdict check_external_case(const Case& c, sut::Session& session,
                                const PropertyOptions& options, const ExternalStep::Upcoming* next,
                                SentAhead& ahead) {
  CaseVerdict verdict;
  verdict.schedule_checked = false;
  const sut::Supports& supports = session.handshake().supports;
  // Sent ahead by the previous check: its reference was computed then.
  std::optional<step::ReferenceValues> found;
  if (session.claim(c)) {
    INFONCE_ASSERT(ahead.reference);
    found = std::move(ahead.reference);
  } else {
    found = reference_to_send(c, supports, options, verdict);
    if (!found) return verdict;
    session.start(c);
  }
  ahead.reference.reset();
  step::ReferenceValues reference = std::move(*found);
  // While the SUT computes `c`: the next case's reference, so that it can be
  // sent as soon as `c`'s response is in, and computed while `c` is judged.
  std::optional<step::ReferenceValues> next_reference;
  if (next) {
    CaseVerdict unused;
    next_reference = reference_to_send(next->c, supports, next->options, unused);
  }
  const sut::StepOutcome outcome = session.run(c);
  if (next_reference) {
    session.send_ahead(next->c);
    ahead.reference = std::move(next_reference);
  }
  if (!outcome.declined.empty()) {
    verdict.discarded = true;
    verdict.declined = outcome.declined;
    verdict.discard_reason = "declined by the SUT: " + outcome.declined;
    return verdict;
  }
  if (!outcome.result) {
    verdict.failures.push_back({kNoCrash, outcome.failure});
    return verdict;
  }
  const sut::StepResult& result = *outcome.result;
  // The reference pads as the SUT did.
  Case judged = c;
  if (c.loss.hard_negatives && result.padding_draws) {
    judged.padding_draws = first_replica_draws(*result.padding_draws, c.mesh);
    try {
      reference = step::compute_case_reference(judged);
    } catch (const InputError& e) {
      verdict.failures.push_back(
          {kNoCrash, std::string("the SUT's padding draws do not fit the case: ") + e.what()});
      return verdict;
    }
  }
  step::DistributedResult distributed = distributed_result(result, judged, reference);
  if (supports.rank_local_loss) judge_rank_local_losses(judged, reference, distributed, verdict);
  verdict.report = evaluate_owed(judged, distributed, reference, verdict);
  judge_against_reference(judged, distributed, reference, options, verdict);
  check_reported_step(verdict.report, verdict);
  // A case with a strategy key has its scale there (and needs compensate true).
  if (!c.strategy && c.compensate && supports.compensate_false && c.loss.use_batch &&
      c.reduction == Reduction::mean && c.mesh.dp >= 2) {
    check_sut_uncompensated(judged, session, reference, verdict);
  }
  return verdict;
}

std::vector<double> rank_local_losses(const Case& c) {
  Case local = c;
  const GatherGroup group = c.strategy ? c.strategy->group : GatherGroup::dp;
  local.strategy = Strategy{GatherKind::detached_own_live, LossScope::local, BackwardScale::none,
                            c.reduction, group};
  local.compensate = true;  // what a strategy requires; the reported value is unscaled
  step::RunOptions options;
  options.share_identical_losses = true;
  return step::run_on_fibers(local, step::StepVariant{}, options).losses;
}

StepRun run_on_sut(sut::Session& session, const Case& c, const step::ReferenceValues& reference) {
  const sut::StepOutcome outcome = session.run(c);
  if (!outcome.declined.empty()) throw StepDeclined(outcome.declined);
  if (!outcome.result) throw StepFailure("the SUT failed: " + outcome.failure);
  StepRun run;
  run.rank_local_loss = session.handshake().supports.rank_local_loss;
  // A world gather with replicas pads each of the R copies: its draws replay
  // in the rank program at the point, but cannot pad the reference's
  // distinct batch, which keeps the case's own generator.
  const bool pads_copies =
      c.strategy && c.strategy->group == GatherGroup::world && c.mesh.replicas() > 1;
  if (c.loss.hard_negatives && outcome.result->padding_draws && pads_copies) {
    run.padding_draws = first_replica_draws(*outcome.result->padding_draws, c.mesh);
    run.result = distributed_result(*outcome.result, c, reference);
    return run;
  }
  if (c.loss.hard_negatives && outcome.result->padding_draws) {
    Case judged = c;
    judged.padding_draws = first_replica_draws(*outcome.result->padding_draws, c.mesh);
    run.padding_draws = judged.padding_draws;
    run.reference = step::compute_case_reference(judged);
    run.result = distributed_result(*outcome.result, judged, *run.reference);
    return run;
  }
  run.result = distributed_result(*outcome.result, c, reference);
  return run;
}

SutStep::SutStep(const std::string& command, double timeout_seconds, std::int32_t jobs) {
  INFONCE_ASSERT(jobs >= 1);
  // Started side by side: a torch SUT takes seconds to import.
  std::vector<std::unique_ptr<sut::Session>> sessions(static_cast<std::size_t>(jobs));
  std::vector<std::exception_ptr> errors(sessions.size());
  {
    std::vector<std::jthread> starters;
    for (std::size_t j = 0; j < sessions.size(); ++j) {
      starters.emplace_back([&, j] {
        try {
          sessions[j] = std::make_unique<sut::Session>(command, timeout_seconds);
        } catch (...) {
          errors[j] = std::current_exception();
        }
      });
    }
  }
  for (const std::exception_ptr& error : errors) {
    if (error) std::rethrow_exception(error);
  }
  for (const auto& session : sessions) {
    if (session->handshake_line() != sessions.front()->handshake_line()) {
      throw InputError("--sut: two SUT processes sent different handshakes (--jobs " +
                       std::to_string(jobs) + ")");
    }
  }
  sessions_ = std::move(sessions);
  ahead_.resize(sessions_.size());
  restriction_ = restriction_of(handshake().supports);
}

Case SutStep::adapt(Case c) const {
  restrict_case(c, restriction_);
  return c;
}

CaseVerdict SutStep::check(const Case& c, std::int32_t job, const PropertyOptions& options) {
  return check_on(c, job, options, nullptr);
}

CaseVerdict SutStep::check_before(const Case& c, std::int32_t job, const PropertyOptions& options,
                                  const Upcoming& next) {
  return check_on(c, job, options, &next);
}

CaseVerdict SutStep::check_on(const Case& c, std::int32_t job, const PropertyOptions& options,
                              const Upcoming* next) {
  INFONCE_ASSERT(job >= 0 && job < static_cast<std::int32_t>(sessions_.size()));
  const auto j = static_cast<std::size_t>(job);
  return check_external_case(c, *sessions_[j], options, next, ahead_[j]);
}

}  // namespace infonce::properties
