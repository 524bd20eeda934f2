// The property campaign: case i of seed S is generated from its own random
// stream (so any case can be replayed alone, and a campaign can be split
// across workers or machines), every property is checked, and the first
// failure is shrunk to a small case.
//
// Determinism: the campaign's result is the result of the sequential run over
// case indices [0, cases), stopped at the smallest failing index, whatever
// the number of worker threads (`jobs`) or the shard. Work is split into
// blocks of kBlockCases consecutive indices; each block keeps its own partial
// result (a Tally), and blocks are combined in index order up to and
// including the block of the smallest failing index, whose tally stops at
// that index. Shard i of N runs blocks b with b % N == i, so N shards cover
// disjoint cases; their per-block records merge into the unsharded result.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <rapidcheck.h>

#include "properties/case_spec.hpp"
#include "properties/external_step.hpp"
#include "properties/generators.hpp"
#include "properties/properties.hpp"

namespace infonce::properties {

// Part of the report format: blocks, shards and merging depend on it.
inline constexpr std::int64_t kBlockCases = 64;
// No case budget: the campaign runs until stop_requested() or a failure.
inline constexpr std::int64_t kUnboundedCases = std::numeric_limits<std::int64_t>::max();

// axis -> value -> cases (transparent comparators: counting a case looks keys
// up without building strings)
using Coverage =
    std::map<std::string, std::map<std::string, std::int64_t, std::less<>>, std::less<>>;

// Distribution of CaseReport::scaled_err (the gradient error relative to the
// summands' scale) in decades: bins[k] counts errors e with
// floor(log10(e)) == kMinExponent + k; smaller positive errors land in bin 0,
// errors >= 10^kMaxExponent in the last bin.
struct ErrorHistogram {
  static constexpr int kMinExponent = -20;
  static constexpr int kMaxExponent = 2;
  static constexpr int kBins = kMaxExponent - kMinExponent + 1;
  std::int64_t exact = 0;       // error exactly 0
  std::int64_t non_finite = 0;  // NaN or inf (a broken step)
  std::vector<std::int64_t> bins = std::vector<std::int64_t>(kBins, 0);

  void add(double scaled_err);
  void merge(const ErrorHistogram& other);
  std::int64_t total() const;
  bool operator==(const ErrorHistogram&) const = default;
};

// What a range of cases gave. Merging is order-independent (sums, maxima).
struct Tally {
  std::int64_t cases_run = 0;  // generated and checked (discards included)
  std::int64_t discarded = 0;
  // Discards by kind (discard_kind of the reference's reason).
  std::map<std::string, std::int64_t> discards_by_reason;
  // Of the discarded: the cases an external step declined, by its reason.
  std::map<std::string, std::int64_t> declined;
  std::map<std::string, std::int64_t> property_checks;  // how often each property was checked
  // Worst gradient error of passing cases relative to the summand scale
  // (CaseReport::scaled_err), per scalar type.
  double worst_rel_err = 0;
  double worst_rel_err_float = 0;
  Coverage coverage;
  std::map<std::string, ErrorHistogram> error_histogram;  // "float64" / "float32"
  std::int64_t self_checked = 0;                          // cases rerun by the self-check

  void merge(const Tally& other);
  bool operator==(const Tally&) const = default;
};

struct ShardSpec {
  std::int64_t index = 0;
  std::int64_t count = 1;
  bool operator==(const ShardSpec&) const = default;
};

// The first index of a shard's slot k, and which shard a block belongs to.
std::int64_t block_of_slot(const ShardSpec& shard, std::int64_t slot);
std::int64_t shard_of_block(std::int64_t block, std::int64_t shard_count);

struct SelfCheckDivergence {
  std::int64_t case_index = 0;
  std::string detail;  // one line: what differed, first difference
  bool operator==(const SelfCheckDivergence&) const = default;
};

// One block's partial result: cases [first_index, first_index + tally.cases_run).
struct BlockRecord {
  std::int64_t block = 0;
  Tally tally;
  std::optional<std::int64_t> failure_index;  // the block stopped at this failing case
  std::optional<SelfCheckDivergence> divergence;
  std::int64_t first_index() const { return block * kBlockCases; }
  std::int64_t end_index() const { return first_index() + tally.cases_run; }
  bool operator==(const BlockRecord&) const = default;
};

struct IndexRange {
  std::int64_t begin = 0;
  std::int64_t end = 0;  // exclusive
  bool operator==(const IndexRange&) const = default;
};

// What ended a campaign. The campaign reports `time` for any stop request;
// a caller whose request came from an interrupt (Ctrl-C) says `interrupted`.
enum class StopReason { cases, time, failure, interrupted };

struct CampaignProgress {
  std::int64_t cases_done = 0;                // checked so far, by every worker
  std::optional<std::int64_t> failure_index;  // the smallest failing index found so far
};

struct CampaignOptions {
  std::uint64_t seed = 1;
  std::int64_t cases = 1000;  // the case budget (kUnboundedCases: none)
  const step::Mutant* mutant = nullptr;
  OracleMode oracle = OracleMode::sampled;  // where oracle-agrees runs
  GeneratorLimits limits = default_limits();
  std::int32_t max_shrink_evaluations = 3000;  // a limit on everything
  std::int32_t jobs = 1;                       // worker threads; the result does not depend on it
  ShardSpec shard;
  // Polled before every case; true ends the campaign at a case boundary (the
  // time budget: the only place a caller may read a clock). Called from the
  // worker threads, so it must be thread-safe.
  std::function<bool()> stop_requested;
  // Called after every block, under the campaign's lock.
  std::function<void(const CampaignProgress&)> on_progress;
  // Rerun every `self_check_every`-th case: generation, the reference and the
  // distributed step under FIFO and another schedule must agree bit for bit.
  bool self_check = false;
  std::int64_t self_check_every = 16;
  bool keep_blocks = false;  // keep per-block records (a shard's report needs them)
  // Not null: every case's step runs there (check --sut), with `jobs`
  // workers of its own; generation, shrinking and tallies stay the same.
  ExternalStep* external = nullptr;
};

struct CampaignFailure {
  std::int64_t case_index = 0;
  CaseSpec original;
  CaseSpec shrunk;
  std::int32_t shrink_steps = 0;          // accepted shrinks
  std::vector<PropertyFailure> failures;  // of the shrunk case
  Case shrunk_case;
  step::CaseReport report;
};

struct CampaignResult : Tally {
  std::optional<CampaignFailure> failure;
  StopReason stopped_by = StopReason::cases;
  std::vector<IndexRange> covered;                // the case indices whose results are counted
  std::optional<SelfCheckDivergence> divergence;  // the first, by case index
  std::vector<BlockRecord> blocks;                // in block order, if keep_blocks
};

// Size parameter and random stream of case `index`: a function of (seed, index) only.
int case_size(std::int64_t index);
rc::Shrinkable<CaseSpec> generate_case(std::uint64_t seed, std::int64_t index,
                                       const GeneratorLimits& limits);
// generate_case(...).value(), safe to call from several threads at once
// (RapidCheck's generator context is a process-wide global).
CaseSpec generate_spec(std::uint64_t seed, std::int64_t index, const GeneratorLimits& limits);

void add_coverage(const CaseSpec& spec, Coverage& coverage);

// The schedule seed a case file's replay compares FIFO with, for a case found
// by the campaign of `seed` (generated cases carry their own, CaseSpec::schedule_seed).
std::uint64_t campaign_schedule_seed(std::uint64_t seed);

// How the campaign checks generated case `spec`: its own schedule seed and
// all-reduce summation order.
PropertyOptions property_options_for(const step::Mutant* mutant, const CaseSpec& spec);

// Shrinks a failing case while `property` still fails; returns the failure.
CampaignFailure shrink_failure(std::int64_t index, const rc::Shrinkable<CaseSpec>& failing,
                               const CaseVerdict& verdict, const CampaignOptions& options);

// Checks one generated case as the campaign does; if it fails, shrinks it
// exactly as the campaign would (`replay --seed S --case-index I`).
struct CaseReplay {
  CaseSpec spec;
  CaseVerdict verdict;
  std::optional<CampaignFailure> failure;
};
CaseReplay replay_case(const CampaignOptions& options, std::int64_t index);

// Reruns one case for the self-check; nullopt when every bit agreed.
std::optional<SelfCheckDivergence> self_check_case(std::uint64_t seed, std::int64_t index,
                                                   const GeneratorLimits& limits,
                                                   const CaseSpec& spec,
                                                   const step::Mutant* mutant);

CampaignResult run_campaign(const CampaignOptions& options);

// Ranges covered by blocks (sorted, adjacent ranges joined).
std::vector<IndexRange> covered_ranges(const std::vector<BlockRecord>& blocks);
// Appends the cases of `block`, which comes after every range in `ranges`.
void add_covered(std::vector<IndexRange>& ranges, const BlockRecord& block);

}  // namespace infonce::properties
