#include "properties/campaign.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <exception>
#include <mutex>
#include <sstream>
#include <thread>

#include "base/assert.hpp"
#include "base/error.hpp"
#include "base/rng.hpp"
#include "casefile/case_json.hpp"
#include "properties/structural_shrink.hpp"

namespace infonce::properties {
namespace {

// RapidCheck keeps its generator context (implicit parameters) in
// process-wide globals: generating or shrinking on two threads at once
// corrupts it. Generation is cheap next to checking a case, so it is
// serialised; checking runs in parallel.
std::mutex& rapidcheck_mutex() {
  static std::mutex mutex;
  return mutex;
}

std::string bucket(std::int32_t n) {
  if (n <= 2) return std::to_string(n);
  std::int32_t hi = 4;
  while (hi < n) hi *= 2;
  return std::to_string(hi / 2 + 1) + "-" + std::to_string(hi);
}

bool has_property(const CaseVerdict& verdict, const std::string& property) {
  return std::any_of(verdict.failures.begin(), verdict.failures.end(),
                     [&](const PropertyFailure& f) { return f.property == property; });
}

bool failed(const CaseVerdict& verdict) {
  return !verdict.discarded && !verdict.failures.empty();
}

const char* scalar_name(ScalarType scalar) {
  return scalar == ScalarType::float64 ? "float64" : "float32";
}

void tally(const CaseVerdict& verdict, const CaseSpec& spec, Tally& result) {
  ++result.cases_run;
  add_coverage(spec, result.coverage);
  if (verdict.rejection_checked) ++result.property_checks[kReferenceAcceptsValid];
  if (verdict.discarded) {
    ++result.discarded;
    if (!verdict.declined.empty()) {
      ++result.declined[verdict.declined];
    } else {
      ++result.discards_by_reason[discard_kind(verdict.discard_reason)];
    }
    return;
  }
  if (verdict.rejection_checked) return;  // the reference failed on valid input: no step ran
  for (const char* p : {kEqualLoss, kPaddingSkipsPositive, kNoCrash}) ++result.property_checks[p];
  if (verdict.reference_checked) ++result.property_checks[kGradientMatches];
  if (verdict.schedule_checked) ++result.property_checks[kScheduleIndependent];
  if (verdict.uncompensated_checked) ++result.property_checks[kUncompensatedRatio];
  if (verdict.code_paths_checked) ++result.property_checks[kCodePathsAgree];
  if (verdict.oracle_checked) ++result.property_checks[kOracleAgrees];
  // A step that threw has no error to show, nor one not judged against the reference.
  if (!verdict.reference_checked) return;
  if (!has_property(verdict, kNoCrash)) {
    result.error_histogram[scalar_name(spec.scalar)].add(verdict.report.scaled_err);
  }
  if (verdict.failures.empty()) {
    double& worst =
        spec.scalar == ScalarType::float64 ? result.worst_rel_err : result.worst_rel_err_float;
    worst = std::max(worst, verdict.report.scaled_err);
  }
}

}  // namespace

PropertyOptions property_options_for(const step::Mutant* mutant, const CaseSpec& spec) {
  PropertyOptions options;
  options.mutant = mutant;
  options.schedule_seed = spec.schedule_seed;
  if (spec.reduction_order_seed != 0) options.reduction_order_seed = spec.reduction_order_seed;
  return options;
}

namespace {

// The campaign's: the case's own options, its oracle mode and its index.
PropertyOptions property_options_of(const CampaignOptions& options, const CaseSpec& spec,
                                    std::int64_t case_index) {
  PropertyOptions property_options = property_options_for(options.mutant, spec);
  property_options.oracle = options.oracle;
  property_options.case_index = case_index;
  return property_options;
}

// The case a spec stands for, as the step at hand runs it.
Case case_of(const CaseSpec& spec, const CampaignOptions& options) {
  Case c = build_restricted_case(spec, options.limits.restriction);
  return options.external ? options.external->adapt(std::move(c)) : c;
}

// A case as a worker checks it: the spec, the case it stands for as the step
// at hand runs it, and its property options.
struct Prepared {
  CaseSpec spec;
  Case c;
  PropertyOptions options;
};

// (`case_index` decides whether a sampled property runs; a shrink candidate
// takes the index of the case it shrinks.)
Prepared prepared(CaseSpec spec, const CampaignOptions& options, std::int64_t case_index) {
  Case c = case_of(spec, options);
  const PropertyOptions property_options = property_options_of(options, spec, case_index);
  return {std::move(spec), std::move(c), property_options};
}

Prepared prepare(const CampaignOptions& options, std::int64_t index) {
  return prepared(generate_spec(options.seed, index, options.limits), options, index);
}

// The verdict of `now` on worker `job`, an external step told of `next`
// (the same verdict as without: the step may only start `next` early).
CaseVerdict verdict_before(const Prepared& now, const Prepared* next,
                           const CampaignOptions& options, std::int32_t job) {
  if (!options.external) return check_case(now.c, now.options);
  if (!next) return options.external->check(now.c, job, now.options);
  return options.external->check_before(now.c, job, now.options, {next->c, next->options});
}

// The verdict of a spec, checked on worker `job`.
CaseVerdict verdict_of(const CaseSpec& spec, const CampaignOptions& options, std::int32_t job,
                       std::int64_t case_index) {
  return verdict_before(prepared(spec, options, case_index), nullptr, options, job);
}

// --- the self-check

std::uint64_t bits_of(double value) {
  std::uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

std::string hex_bits(double value) {
  std::ostringstream out;
  out << std::hex << "0x" << bits_of(value);
  return out.str();
}

// The first entry where two vectors differ in bits; nullopt if none.
std::optional<std::string> first_difference(const std::vector<double>& a,
                                            const std::vector<double>& b, const std::string& what) {
  if (a.size() != b.size()) {
    return what + " has " + std::to_string(a.size()) + " vs " + std::to_string(b.size()) +
           " entries";
  }
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (bits_of(a[i]) != bits_of(b[i])) {
      return what + " entry " + std::to_string(i) + ": " + hex_bits(a[i]) + " vs " + hex_bits(b[i]);
    }
  }
  return std::nullopt;
}

std::optional<std::string> compare_runs(const step::DistributedResult& a,
                                        const step::DistributedResult& b) {
  if (auto d = first_difference(a.losses, b.losses, "reported losses")) return d;
  if (a.grads.size() != b.grads.size()) return std::string("rank counts differ");
  for (std::size_t w = 0; w < a.grads.size(); ++w) {
    if (auto d =
            first_difference(a.grads[w], b.grads[w], "rank " + std::to_string(w) + " gradient")) {
      return d;
    }
  }
  if (a.padded_positives != b.padded_positives) return std::string("padded positives differ");
  return std::nullopt;
}

std::vector<double> flat(const Matrix<double>& m) {
  return {m.data(), m.data() + m.size()};
}

// The distributed step under `schedule`, or the message it threw.
struct StepOutcome {
  std::optional<step::DistributedResult> result;
  std::string error;
};

StepOutcome run_step(const step::DistributedSetup& setup, const PropertyOptions& property_options,
                     sim::Schedule schedule, bool share) {
  step::RunOptions options;
  options.schedule = schedule;
  options.reduction_order_seed = property_options.reduction_order_seed;
  options.share_identical_losses = share;
  try {
    return {step::run_on_fibers(setup.distributed_case(), setup.variant, options), {}};
  } catch (const std::exception& e) {
    return {std::nullopt, e.what()};
  }
}

std::optional<std::string> compare_outcomes(const StepOutcome& a, const StepOutcome& b,
                                            const std::string& what) {
  if (a.result && b.result) {
    if (auto d = compare_runs(*a.result, *b.result)) return what + ": " + *d;
    return std::nullopt;
  }
  if (!a.result && !b.result && a.error == b.error) return std::nullopt;
  return what + ": one run threw (" + (a.result ? b.error : a.error) + ")";
}

std::optional<std::string> find_divergence(std::uint64_t seed, std::int64_t index,
                                           const GeneratorLimits& limits, const CaseSpec& spec,
                                           const step::Mutant* mutant) {
  const Case c = build_case(spec);
  // Generation: a fresh generator from (seed, index) gives the same case bytes.
  const std::string json = case_to_json(c);
  const CaseSpec again = generate_spec(seed, index, limits);
  if (case_to_json(build_case(again)) != json) {
    return "generation: regenerating the case gave different case JSON (" + describe(again) + ")";
  }
  step::ReferenceValues reference;
  try {
    reference = step::compute_case_reference(c);
  } catch (const InputError&) {
    return std::nullopt;  // the campaign discards it: nothing more to compare
  }
  const step::ReferenceValues again_reference = step::compute_case_reference(c);
  if (bits_of(reference.loss) != bits_of(again_reference.loss)) {
    return "reference loss twice: " + hex_bits(reference.loss) + " vs " +
           hex_bits(again_reference.loss);
  }
  if (auto d = first_difference(flat(reference.grad), flat(again_reference.grad),
                                "reference twice: gradient")) {
    return d;
  }
  const step::DistributedSetup setup = step::distributed_setup(c, mutant);
  // As the properties run it (ranks share a loss on identical inputs), then
  // with every rank computing its own: sharing must not change a bit.
  const PropertyOptions property_options = property_options_for(mutant, spec);
  const StepOutcome fifo = run_step(setup, property_options, {sim::ScheduleKind::fifo, 0}, true);
  const StepOutcome fifo_again =
      run_step(setup, property_options, {sim::ScheduleKind::fifo, 0}, false);
  if (auto d = compare_outcomes(fifo, fifo_again, "FIFO shared vs unshared")) return d;
  // Another interleaving than the property's own schedule-independence check.
  const std::uint64_t other =
      derive_seed(campaign_schedule_seed(seed) ^ 0x5e1fc4ecULL, static_cast<std::uint64_t>(index));
  const StepOutcome shuffled =
      run_step(setup, property_options, {sim::ScheduleKind::random, other}, true);
  return compare_outcomes(fifo, shuffled, "FIFO vs schedule seed " + std::to_string(other));
}

// --- shrinking: candidates are checked `jobs` at a time, and the first
// failing one in RapidCheck's order is taken, so the result is the
// sequential shrink's.

struct Candidate {
  rc::Shrinkable<CaseSpec> shrinkable;
  CaseSpec spec;
};

std::vector<Candidate> next_candidates(rc::Seq<rc::Shrinkable<CaseSpec>>& sequence,
                                       std::int32_t count) {
  std::lock_guard lock(rapidcheck_mutex());
  std::vector<Candidate> batch;
  while (static_cast<std::int32_t>(batch.size()) < count) {
    auto next = sequence.next();
    if (!next) break;
    CaseSpec spec = next->value();
    batch.push_back({std::move(*next), std::move(spec)});
  }
  return batch;
}

// Candidate i runs on worker i (a batch holds at most `jobs` candidates).
std::vector<CaseVerdict> check_all(const std::vector<Candidate>& batch,
                                   const CampaignOptions& options, std::int64_t case_index) {
  std::vector<CaseVerdict> verdicts(batch.size());
  auto check = [&](std::size_t i) {
    verdicts[i] = verdict_of(batch[i].spec, options, static_cast<std::int32_t>(i), case_index);
  };
  std::vector<std::jthread> helpers;
  for (std::size_t i = 1; i < batch.size(); ++i) helpers.emplace_back(check, i);
  if (!batch.empty()) check(0);
  return verdicts;
}

// --- the block runner

struct BlockWork {
  BlockRecord record;
  std::optional<CaseVerdict> failing_verdict;
  bool truncated = false;  // stopped early by stop_requested: a partial block
  bool aborted = false;    // beyond a known failure: its result is not needed
};

class Campaign {
 public:
  explicit Campaign(const CampaignOptions& options) : options_(options) {}

  CampaignResult run() {
    const std::int32_t jobs = std::max(1, options_.jobs);
    {
      std::vector<std::jthread> workers;
      for (std::int32_t j = 1; j < jobs; ++j) workers.emplace_back([this, j] { guarded_work(j); });
      guarded_work(0);
    }
    if (error_) std::rethrow_exception(error_);
    return assemble();
  }

 private:
  static constexpr std::int64_t kNoFailure = std::numeric_limits<std::int64_t>::max();

  bool should_stop() {
    if (stopping_.load()) return true;
    if (options_.stop_requested && options_.stop_requested()) {
      stopping_.store(true);
      return true;
    }
    return false;
  }

  // An exception ends every worker and is rethrown on the calling thread,
  // as the sequential loop would have thrown it.
  void guarded_work(std::int32_t job) {
    try {
      work(job);
    } catch (...) {
      std::lock_guard lock(mutex_);
      if (!error_) error_ = std::current_exception();
      stopping_.store(true);
    }
  }

  void work(std::int32_t job) {
    while (!stopping_.load()) {
      const std::int64_t slot = next_slot_.fetch_add(1);
      const std::int64_t block = block_of_slot(options_.shard, slot);
      if (block < 0 || block > (options_.cases - 1) / kBlockCases) return;
      // Later slots hold later blocks: none is needed after a failure.
      if (block * kBlockCases > failure_min_.load()) return;
      BlockWork done = run_block(block, job);
      std::lock_guard lock(mutex_);
      cases_done_ += done.record.tally.cases_run;
      if (options_.on_progress) {
        const std::int64_t failure = failure_min_.load();
        options_.on_progress(
            {cases_done_, failure == kNoFailure ? std::nullopt : std::optional(failure)});
      }
      work_.emplace(slot, std::move(done));
      fold_ready_blocks();
    }
  }

  // Whether assemble() would merge this block and go on to the next one.
  static bool plain(const BlockWork& work) {
    return !work.aborted && !work.record.failure_index && !work.truncated;
  }

  // Merges the finished blocks at the front of the slot order into `folded_`
  // as they arrive (what assemble() would do with them), so memory stays
  // bounded however long a campaign runs: a block's tally holds its coverage
  // maps, and a 10-minute campaign has hundreds of thousands of blocks.
  // Stops at the first block assemble() treats specially.
  void fold_ready_blocks() {
    for (auto it = work_.find(next_fold_slot_); it != work_.end() && plain(it->second);
         it = work_.find(next_fold_slot_)) {
      merge_block(it->second.record, folded_);
      work_.erase(it);
      ++next_fold_slot_;
    }
  }

  void merge_block(const BlockRecord& record, CampaignResult& result) const {
    result.merge(record.tally);
    if (record.divergence && !result.divergence) result.divergence = record.divergence;
    add_covered(result.covered, record);
    if (options_.keep_blocks) result.blocks.push_back(record);
  }

  BlockWork run_block(std::int64_t block, std::int32_t job) {
    BlockWork work;
    work.record.block = block;
    const std::int64_t first = block * kBlockCases;
    const std::int64_t end = std::min(first + kBlockCases, options_.cases);
    // An external step is told the block's next case, to start it early.
    std::optional<Prepared> next;
    for (std::int64_t index = first; index < end; ++index) {
      if (index > failure_min_.load()) {
        work.aborted = true;
        break;
      }
      // Once a failure is known, the blocks before it must finish whatever
      // the clock says, so that the failure is reported.
      if (failure_min_.load() == kNoFailure && should_stop()) {
        work.truncated = true;
        break;
      }
      Prepared now = next ? std::move(*next) : prepare(options_, index);
      next.reset();
      if (options_.external && index + 1 < end) next = prepare(options_, index + 1);
      if (check_one(now, next ? &*next : nullptr, job, work)) break;
    }
    return work;
  }

  // Checks case `now.options.case_index` into the block; true if it failed.
  bool check_one(const Prepared& now, const Prepared* next, std::int32_t job, BlockWork& work) {
    const std::int64_t index = now.options.case_index;
    const CaseSpec& spec = now.spec;
    const CaseVerdict verdict = verdict_before(now, next, options_, job);
    tally(verdict, spec, work.record.tally);
    if (options_.self_check && index % std::max<std::int64_t>(1, options_.self_check_every) == 0) {
      ++work.record.tally.self_checked;
      auto divergence =
          self_check_case(options_.seed, index, options_.limits, spec, options_.mutant);
      if (divergence && !work.record.divergence) work.record.divergence = std::move(divergence);
    }
    if (!failed(verdict)) return false;
    work.record.failure_index = index;
    work.failing_verdict = verdict;
    std::int64_t known = failure_min_.load();
    while (index < known && !failure_min_.compare_exchange_weak(known, index)) {
    }
    return true;
  }

  // The sequential run's result: blocks in slot order up to the first one
  // that is missing, partial, aborted or failing (that one included unless
  // aborted or missing).
  CampaignResult assemble() {
    CampaignResult result = std::move(folded_);
    const BlockWork* failing = nullptr;
    bool complete = true;
    for (std::int64_t slot = next_fold_slot_;; ++slot) {
      const auto it = work_.find(slot);
      if (it == work_.end()) {
        const std::int64_t block = block_of_slot(options_.shard, slot);
        complete = block < 0 || block > (options_.cases - 1) / kBlockCases;
        break;
      }
      const BlockWork& work = it->second;
      if (work.aborted) {
        complete = false;
        break;
      }
      merge_block(work.record, result);
      if (work.record.failure_index) {
        failing = &work;
        break;
      }
      if (work.truncated) {
        complete = false;
        break;
      }
    }
    if (failing != nullptr) {
      result.stopped_by = StopReason::failure;
      const std::int64_t index = *failing->record.failure_index;
      rc::Shrinkable<CaseSpec> shrinkable = [&] {
        std::lock_guard lock(rapidcheck_mutex());
        return generate_case(options_.seed, index, options_.limits);
      }();
      result.failure = shrink_failure(index, shrinkable, *failing->failing_verdict, options_);
    } else {
      result.stopped_by = complete ? StopReason::cases : StopReason::time;
    }
    return result;
  }

  const CampaignOptions& options_;
  std::atomic<std::int64_t> next_slot_{0};
  std::atomic<std::int64_t> failure_min_{kNoFailure};
  std::atomic<bool> stopping_{false};
  std::mutex mutex_;
  std::int64_t cases_done_ = 0;
  std::map<std::int64_t, BlockWork> work_;  // by slot, from next_fold_slot_ on
  CampaignResult folded_;                   // blocks [0, next_fold_slot_) merged
  std::int64_t next_fold_slot_ = 0;
  std::exception_ptr error_;
};

}  // namespace

void ErrorHistogram::add(double scaled_err) {
  if (!std::isfinite(scaled_err)) {
    ++non_finite;
  } else if (scaled_err <= 0) {
    ++exact;
  } else {
    const int exponent = static_cast<int>(std::floor(std::log10(scaled_err)));
    const int bin = std::clamp(exponent, kMinExponent, kMaxExponent) - kMinExponent;
    ++bins[static_cast<std::size_t>(bin)];
  }
}

void ErrorHistogram::merge(const ErrorHistogram& other) {
  exact += other.exact;
  non_finite += other.non_finite;
  for (std::size_t i = 0; i < bins.size(); ++i) bins[i] += other.bins[i];
}

std::int64_t ErrorHistogram::total() const {
  std::int64_t sum = exact + non_finite;
  for (const std::int64_t n : bins) sum += n;
  return sum;
}

void Tally::merge(const Tally& other) {
  cases_run += other.cases_run;
  discarded += other.discarded;
  for (const auto& [reason, count] : other.discards_by_reason) discards_by_reason[reason] += count;
  for (const auto& [reason, count] : other.declined) declined[reason] += count;
  for (const auto& [property, count] : other.property_checks) property_checks[property] += count;
  worst_rel_err = std::max(worst_rel_err, other.worst_rel_err);
  worst_rel_err_float = std::max(worst_rel_err_float, other.worst_rel_err_float);
  for (const auto& [axis, values] : other.coverage) {
    for (const auto& [value, count] : values) coverage[axis][value] += count;
  }
  for (const auto& [scalar, histogram] : other.error_histogram) {
    error_histogram[scalar].merge(histogram);
  }
  self_checked += other.self_checked;
}

std::int64_t block_of_slot(const ShardSpec& shard, std::int64_t slot) {
  INFONCE_ASSERT(shard.count >= 1 && shard.index >= 0 && shard.index < shard.count);
  if (slot > (std::numeric_limits<std::int64_t>::max() - shard.index) / shard.count) return -1;
  return shard.index + slot * shard.count;
}

std::int64_t shard_of_block(std::int64_t block, std::int64_t shard_count) {
  return block % shard_count;
}

int case_size(std::int64_t index) {
  return static_cast<int>(index % 100);
}

rc::Shrinkable<CaseSpec> generate_case(std::uint64_t seed, std::int64_t index,
                                       const GeneratorLimits& limits) {
  const rc::Random random(derive_seed(seed, static_cast<std::uint64_t>(index)));
  return case_spec_gen(limits)(random, case_size(index));
}

CaseSpec generate_spec(std::uint64_t seed, std::int64_t index, const GeneratorLimits& limits) {
  std::lock_guard lock(rapidcheck_mutex());
  return generate_case(seed, index, limits).value();
}

std::uint64_t campaign_schedule_seed(std::uint64_t seed) {
  return derive_seed(seed, ~0ULL);
}

namespace {

// coverage[axis][value]++, with no allocation once both keys exist (this runs
// for every case).
void count(Coverage& coverage, std::string_view axis, std::string_view value) {
  auto values = coverage.find(axis);
  if (values == coverage.end())
    values = coverage.emplace(std::string(axis), Coverage::mapped_type{}).first;
  auto entry = values->second.find(value);
  if (entry == values->second.end()) entry = values->second.emplace(std::string(value), 0).first;
  ++entry->second;
}

std::string_view flag(bool value) {
  return value ? "true" : "false";
}

// How `<<` prints a double (6 significant digits): the generators' choices
// are spelled out, anything else is formatted.
std::string decimal(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

}  // namespace

void add_coverage(const CaseSpec& spec, Coverage& coverage) {
  std::int32_t groups = 0;
  bool unequal_shards = false;
  bool rank0_empty = false;
  bool other_empty = false;
  for (const auto& micro : spec.negatives) {
    for (std::size_t d = 0; d < micro.size(); ++d) {
      const auto& shard = micro[d];
      groups += static_cast<std::int32_t>(shard.size());
      unequal_shards = unequal_shards || shard.size() != micro[0].size();
      (d == 0 ? rank0_empty : other_empty) |= shard.empty();
    }
  }
  count(coverage, "world", bucket(spec.world));
  count(coverage, "dp", bucket(spec.dp));
  count(coverage, "replicas", bucket(spec.world / spec.dp));
  count(coverage, "use_batch", flag(spec.use_batch));
  count(coverage, "hard_negatives",
        spec.hard_negatives ? std::to_string(spec.hard_negatives) : "unset");
  count(coverage, "mask_fake_negative", flag(spec.mask_fake_negative));
  if (spec.mask_fake_negative) count(coverage, "fake_neg_margin", decimal(spec.fake_neg_margin));
  count(coverage, "include_qq", flag(spec.include_qq));
  count(coverage, "include_dd", flag(spec.include_dd));
  count(coverage, "temperature", decimal(spec.temperature));
  count(coverage, "accumulation_steps", std::to_string(spec.accumulation_steps()));
  count(coverage, "accumulation_normalize", flag(spec.accumulation_normalize));
  count(coverage, "reduction", spec.reduction == Reduction::mean ? "mean" : "sum");
  count(coverage, "gather", spec.gather == GatherPath::object ? "object" : "tensor");
  count(coverage, "scalar", spec.scalar == ScalarType::float64 ? "float64" : "float32");
  count(coverage, "encoder_normalize", flag(spec.normalize));
  count(coverage, "groups_total", bucket(groups));
  count(coverage, "unequal_group_counts", flag(unequal_shards));
  // The axes that hunt for trouble (issue 11).
  count(coverage, "empty_shard", rank0_empty ? "rank 0" : other_empty ? "other rank" : "none");
  count(coverage, "compensate", flag(spec.compensate));
  count(coverage, "rng_mode", spec.per_rank_rng ? "per-rank" : "synced");
  count(coverage, "accumulation_window", spec.idle_steps > 0 ? "partial" : "full");
  if (spec.hard_negatives > 0)
    count(coverage, "padding_draws", spec.record_draws ? "recorded" : "generated");
  count(coverage, "features", name_of(spec.features));
  // How the case is run (not part of its file).
  count(coverage, "reduction_order", spec.reduction_order_seed != 0 ? "permuted" : "rank order");
  count(coverage, "schedule_seed", "per case");
}

namespace {

// After RapidCheck's shrinks: the structural ones (properties/structural_shrink.hpp),
// greedily, the first failing candidate in their order taken `jobs` at a time
// (the sequential result, as above), until none fails or the evaluations run out.
void shrink_structure(std::int64_t index, const std::string& property,
                      const CampaignOptions& options, std::int32_t& evaluations,
                      CampaignFailure& failure, CaseVerdict& verdict) {
  const auto jobs = static_cast<std::size_t>(std::max(1, options.jobs));
  bool shrunk = true;
  while (shrunk && evaluations < options.max_shrink_evaluations) {
    shrunk = false;
    const std::vector<CaseSpec> specs =
        structural_shrinks(failure.shrunk, options.limits.restriction);
    for (std::size_t first = 0; !shrunk && first < specs.size(); first += jobs) {
      std::vector<Candidate> batch;
      for (std::size_t i = first;
           i < specs.size() && i < first + jobs &&
           evaluations + static_cast<std::int32_t>(batch.size()) < options.max_shrink_evaluations;
           ++i) {
        batch.push_back({rc::shrinkable::just(specs[i]), specs[i]});
      }
      if (batch.empty()) break;
      const auto verdicts = check_all(batch, options, index);
      for (std::size_t i = 0; i < batch.size(); ++i) {
        ++evaluations;
        if (verdicts[i].discarded || !has_property(verdicts[i], property)) continue;
        failure.shrunk = batch[i].spec;
        verdict = verdicts[i];
        ++failure.shrink_steps;
        shrunk = true;
        break;
      }
    }
  }
}

}  // namespace

CampaignFailure shrink_failure(std::int64_t index, const rc::Shrinkable<CaseSpec>& failing,
                               const CaseVerdict& verdict, const CampaignOptions& options) {
  const std::string property = verdict.failures.front().property;
  const std::int32_t jobs = std::max(1, options.jobs);
  CampaignFailure failure;
  failure.case_index = index;
  rc::Shrinkable<CaseSpec> current = failing;
  {
    std::lock_guard lock(rapidcheck_mutex());
    failure.original = failing.value();
  }
  failure.shrunk = failure.original;
  CaseVerdict current_verdict = verdict;
  std::int32_t evaluations = 0;
  bool shrunk = true;
  while (shrunk && evaluations < options.max_shrink_evaluations) {
    shrunk = false;
    auto candidates = [&] {
      std::lock_guard lock(rapidcheck_mutex());
      return current.shrinks();
    }();
    while (!shrunk && evaluations < options.max_shrink_evaluations) {
      const auto batch =
          next_candidates(candidates, std::min(jobs, options.max_shrink_evaluations - evaluations));
      if (batch.empty()) break;
      const auto verdicts = check_all(batch, options, index);
      for (std::size_t i = 0; i < batch.size(); ++i) {
        ++evaluations;
        if (!verdicts[i].discarded && has_property(verdicts[i], property)) {
          current = batch[i].shrinkable;
          failure.shrunk = batch[i].spec;
          current_verdict = verdicts[i];
          ++failure.shrink_steps;
          shrunk = true;
          break;
        }
      }
    }
  }
  shrink_structure(index, property, options, evaluations, failure, current_verdict);
  failure.shrunk_case = case_of(failure.shrunk, options);
  failure.failures = current_verdict.failures;
  failure.report = current_verdict.report;
  return failure;
}

CaseReplay replay_case(const CampaignOptions& options, std::int64_t index) {
  CaseReplay replay;
  rc::Shrinkable<CaseSpec> shrinkable = [&] {
    std::lock_guard lock(rapidcheck_mutex());
    auto generated = generate_case(options.seed, index, options.limits);
    replay.spec = generated.value();
    return generated;
  }();
  replay.verdict = verdict_of(replay.spec, options, 0, index);
  if (failed(replay.verdict)) {
    replay.failure = shrink_failure(index, shrinkable, replay.verdict, options);
  }
  return replay;
}

std::optional<SelfCheckDivergence> self_check_case(std::uint64_t seed, std::int64_t index,
                                                   const GeneratorLimits& limits,
                                                   const CaseSpec& spec,
                                                   const step::Mutant* mutant) {
  auto detail = find_divergence(seed, index, limits, spec, mutant);
  if (!detail) return std::nullopt;
  return SelfCheckDivergence{index, *detail};
}

CampaignResult run_campaign(const CampaignOptions& options) {
  INFONCE_ASSERT(options.cases >= 1);
  // Without a case budget only a stop request (or a failure) ends it.
  INFONCE_ASSERT(options.cases != kUnboundedCases || options.stop_requested);
  // The self-check reruns the harness's own step; an external one has none.
  INFONCE_ASSERT(!options.self_check || options.external == nullptr);
  return Campaign(options).run();
}

void add_covered(std::vector<IndexRange>& ranges, const BlockRecord& block) {
  if (block.tally.cases_run == 0) return;
  const IndexRange range{block.first_index(), block.end_index()};
  if (!ranges.empty() && ranges.back().end == range.begin) {
    ranges.back().end = range.end;
  } else {
    ranges.push_back(range);
  }
}

std::vector<IndexRange> covered_ranges(const std::vector<BlockRecord>& blocks) {
  std::vector<IndexRange> ranges;
  for (const BlockRecord& block : blocks) add_covered(ranges, block);
  return ranges;
}

}  // namespace infonce::properties
