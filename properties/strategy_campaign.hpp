// The strategy campaign (issue 13 point 5, InfoNCE family, encoder weights):
// every generated case is run at one point of the 36-point strategy space
// (the case file's "strategy" key), and the step's gradient is compared with
// what step/strategy.hpp predicts for that case's shape:
//   - correct: the step's gradient is the reference gradient;
//   - ratio r: it is r x the reference gradient;
//   - no single ratio: the step must differ from every multiple of the
//     reference (a counterexample); a case where it does not (a gradient
//     parallel to the reference by accident, e.g. D x F = 1) is counted as
//     skipped, not passed.
// Within the step's tolerance (step/tolerance.hpp) scaled by max(|r|, 1).
// Case i's strategy is a function of (seed, i) only, like its spec. Every
// other InfoNCE case also has a learnable inverse temperature (the case file's
// "learnable_temperature"), and every CLIP case has its log logit scale (and
// a bias where the spec says), whose gradients are compared with the
// prediction for the direct parameters the same way. Both loss families run
// at every point (FamilyChoice::both: every other case is CLIP).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "casefile/case.hpp"
#include "properties/case_spec.hpp"
#include "properties/generators.hpp"
#include "properties/point_comparison.hpp"
#include "step/run_case.hpp"
#include "step/strategy.hpp"

namespace infonce::properties {

// The loss families a strategy campaign draws from.
enum class FamilyChoice { both, infonce, clip, ntxent, siglip };  // both: InfoNCE and CLIP

enum class StrategyObservation {

  discarded,          // the reference rejects the case (as the main campaign discards it)
  near_tie,           // not judged: a float32 local loss with the fake-negative mask, whose
                      // per-group loop can decide a near tie with the threshold otherwise
                      // than the reference's path (as oracle-agrees skips such cases)
  confirmed,          // what the prediction says: the gradient is r x the reference, or
                      // (no single ratio) a counterexample
  no_counterexample,  // no single ratio predicted, but this case's gradient is a multiple
  mismatch,           // the prediction is wrong for this case (or the step threw)
};

// The direct parameters' group (a learnable inverse temperature) of a case.
enum class DirectObservation {
  absent,      // the case has no direct parameter, or its step was not judged
  confirmed,   // the gradient is the predicted r x the reference's
  one_number,  // predicted no single ratio: one number is always a multiple of
               // the reference, so one case cannot show it (not judged)
  mismatch,    // not what the prediction says
};

struct StrategyCaseResult {
  step::Strategy strategy;
  step::StepShape shape;
  step::Prediction prediction;         // the encoders'
  step::Prediction direct_prediction;  // the direct parameters' (when the case has them)
  DirectObservation direct = DirectObservation::absent;
  // The direct group's first parameter (1/T, or CLIP's log logit scale) as
  // the step and the reference give it: set when the case has one and its
  // step ran (a one_number case included).
  struct DirectValues {
    double step = 0;
    double reference = 0;
  };
  std::optional<DirectValues> direct_values;
  StrategyObservation observation = StrategyObservation::discarded;
  std::string detail;  // one line
  // mismatch: what differed, the key its mismatches are grouped by (e.g.
  // "encoder gradient differs from the point's rank program").
  std::string cause;
  // no_counterexample: a zero reference, D x F = 1, or a DP shard without a group
  bool trivially_parallel = false;
  bool reference_zero = false;  // the reference gradient is exactly 0
  // The oracle judged the case's reference (StrategyCampaignOptions::oracle):
  // it agreed, or the case is a mismatch saying how it differed.
  bool oracle_judged = false;
};

// Runs a case's data-parallel step, given the case's reference. Unset: the
// rank program on the fiber simulator. An external SUT's runner
// (properties/sut_step.hpp) throws with the SUT's one-line failure, a
// mismatch of the case.
struct StepRun {
  step::DistributedResult result;
  // Set when the step padded with draws of its own (an external SUT's
  // generators): the reference of the case padded with them, which the step
  // is judged against instead.
  std::optional<step::ReferenceValues> reference;
  // Those draws ([micro][dp shard], each shard's first replica): the rank
  // program at the case's point replays them when it judges the step.
  std::optional<loss::RecordedDraws> padding_draws;
  // The step reports each rank's own rows' loss (handshake reported_loss
  // "rank-local"): judged against properties::rank_local_losses, not the
  // point's reported loss.
  bool rank_local_loss = false;
};
using StepRunner = std::function<StepRun(const Case&, const step::ReferenceValues&)>;
// Thrown by a runner whose step declined the case (with its reason): the
// case is discarded, not a mismatch.
class StepDeclined : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// How far a step judged on `c` may round from the rank program at its point
// (properties/point_comparison.hpp), from the case and its reference.
PointAllowance point_allowance(const Case& c, const step::ReferenceValues& reference);

// Checks `c` (its strategy key set) against the prediction for its shape.
// With `oracle`, the reference the step is judged against is first judged
// by oracle/ (as oracle-agrees does, docs/oracle.md): a reference that differs
// from it, or rejects a case it evaluates, makes the case a mismatch.
StrategyCaseResult check_strategy_case(const Case& c, const StepRunner& runner = {},
                                       bool oracle = false);

// The shape the prediction needs: P, W, use_batch, and whether every DP
// shard has the same number of groups in every micro-step that runs.
step::StepShape step_shape(const Case& c);

struct StrategyCampaignOptions {
  std::uint64_t seed = 1;
  std::int64_t cases = 3600;  // case indices [first_case, cases) run
  std::int64_t first_case = 0;
  GeneratorLimits limits = default_limits();
  std::optional<step::Strategy> only;  // unset: every point
  FamilyChoice families = FamilyChoice::both;
  // What the step can run (an external SUT): every case's shards made equal;
  // no learnable temperature; cases `skip` names a reason for are counted as
  // discarded with it (outside the SUT's supports).
  bool equal_batches_only = false;
  bool learnable_temperature = true;
  std::function<std::optional<std::string>(const Case&)> skip;
  StepRunner runner;  // unset: the fiber simulator
  // Judge every case's reference by oracle/ (check_strategy_case): the only
  // campaign that draws the CLIP family and learnable temperatures, so the
  // only one where the oracle sees them (issue 30).
  bool oracle = false;
};

// Case `index` of the strategy campaign: the main campaign's case (seed,
// index), run at the strategy drawn for (seed, index) (or at `only`), with
// its reduction and the fix's compensate flag set to match. Every other case
// with a local loss has its DP shards' group sizes made equal (the
// first shard with a group's, per micro-step).
// With FamilyChoice::both, every other case (a function of (seed, index)) is
// the CLIP case of its spec (properties/clip_case.hpp).
// The options' families, equal batches and learnable temperature apply.
Case strategy_case(std::uint64_t seed, std::int64_t index, const GeneratorLimits& limits,
                   const std::optional<step::Strategy>& only, CaseSpec* spec = nullptr,
                   const StrategyCampaignOptions* draws = nullptr);

// "both", "infonce", "clip", "ntxent" or "siglip"; throws InputError naming the choices otherwise.
FamilyChoice parse_family_choice(const std::string& text);

struct StrategyCell {
  std::int64_t cases = 0;
  std::int64_t discarded = 0;
  std::int64_t near_ties = 0;  // not judged (StrategyObservation::near_tie)
  std::int64_t confirmed = 0;  // = correct + ratio + counterexamples
  std::int64_t correct = 0;    // predicted correct, and the gradient is the reference
  std::int64_t ratio = 0;      // predicted ratio r != 1, and the gradient is r x the reference
  std::int64_t counterexamples = 0;  // predicted no single ratio, and the gradient is none
  std::int64_t no_counterexample = 0;
  // no_counterexample cases that neither a zero reference gradient, nor a
  // one-number gradient (D x F = 1), nor a DP shard without a group (the
  // shards with groups may still be equal) explains
  std::int64_t no_counterexample_other = 0;
  std::int64_t mismatched = 0;
  // The direct group (a learnable inverse temperature), on the cases that have it:
  std::int64_t direct_confirmed = 0;   // the predicted r x the reference's (r = 1: correct)
  std::int64_t direct_one_number = 0;  // predicted no single ratio (not judged: one number)
  std::int64_t oracle_judged = 0;      // cases whose reference the oracle judged
  std::optional<std::int64_t> first_mismatch_index;
  std::string first_mismatch;  // one line: the case and what differed
  std::string first_discard;   // one line: the first discarded case and why
};

// The mismatches of one cause: how many, and the first few as one line each.
struct MismatchGroup {
  static constexpr std::size_t kKept = 12;
  std::int64_t count = 0;
  std::vector<std::int64_t> indices;  // the first kKept cases' indices
  std::vector<std::string> lines;     // "case I (family point): detail", the first kKept
};

struct StrategyCampaignResult {
  std::array<StrategyCell, step::kPointCount> cells;         // InfoNCE, in all_strategies() order
  std::array<StrategyCell, step::kPointCount> clip_cells;    // CLIP, likewise
  std::array<StrategyCell, step::kPointCount> ntxent_cells;  // NT-Xent (--family ntxent)
  std::array<StrategyCell, step::kPointCount> siglip_cells;  // SigLIP (--family siglip)
  std::map<std::string, MismatchGroup> mismatches_by_cause;
  std::int64_t cases = 0;
  std::int64_t mismatched() const;
  std::int64_t oracle_judged() const;       // both families
  std::int64_t oracle_judged_clip() const;  // CLIP only
};

StrategyCampaignResult run_strategy_campaign(const StrategyCampaignOptions& options);
// Counts case `index` (`c`, judged as `r`) into `out`, as the campaign does.
void tally_strategy_case(std::int64_t index, const Case& c, const StrategyCaseResult& r,
                         StrategyCampaignResult& out, const CaseSpec* spec = nullptr);

// A mismatching campaign case shrunk while it mismatches for the same cause
// (every candidate run as the campaign runs it: its runner and its skip).
struct StrategyShrunk {
  std::int64_t index = 0;     // the campaign case it was shrunk from
  Case shrunk_case;           // its case file carries the "strategy" key
  StrategyCaseResult result;  // of the shrunk case
  std::string shrunk_text;    // the shrunk spec in one line
  std::int32_t shrink_steps = 0;
};
StrategyShrunk shrink_strategy_mismatch(const StrategyCampaignOptions& options, std::int64_t index,
                                        const std::string& cause, std::int32_t max_evaluations);

// "all", or a point's name ("autograd/local/scale-P/mean"); nullopt for "all".
// Throws InputError naming the choices for anything else.
std::optional<step::Strategy> parse_strategy_choice(const std::string& text);

// A shrunk case that shows a wrong point wrong for one parameter group: the
// group's gradient visibly not the reference's, as predicted (r x it with
// r != 1, or no multiple). The direct group is one number, which is always
// some multiple of the reference's: its "no single ratio" witness (a local
// loss with unequal batches) is a case whose ratio is not the one the same
// point gives with equal batches.
struct StrategyWitness {
  std::int64_t index = 0;     // the campaign case (seed, index) it was shrunk from
  CaseSpec original, shrunk;  // as run (negatives made equal where drawn)
  Case shrunk_case;           // its case file carries the "strategy" key
  StrategyCaseResult result;  // of the shrunk case
  // The original and the shrunk case in one line each, as their family reads
  // the spec (its StrategyFamily::describe).
  std::string original_text, shrunk_text;
  step::Prediction predicted;  // the group's, for the shrunk case's shape
  std::string observed;        // one line: what the shrunk case's step gave
  std::int32_t shrink_steps = 0;
};

struct StrategyWitnessOptions {
  step::Strategy point;
  std::uint64_t seed = 1;
  GeneratorLimits limits = default_limits();
  std::int64_t max_cases = 200;                 // cases tried before giving up (a limit)
  std::int32_t max_shrink_evaluations = 2000;   // RapidCheck shrink candidates judged
  FamilyChoice family = FamilyChoice::infonce;  // one family (strategy_families())
  // The group shown wrong. direct: an InfoNCE case gets a learnable 1/T.
  step::ParameterGroup group = step::ParameterGroup::encoders;
  // Only cases with the gather (use_batch), as the strategy matrix assumes:
  // without one the scope and the gather do not apply.
  bool with_gather = true;
  // Only cases whose own prediction for the group has this verdict (a
  // no-single-ratio cell's witness is a counterexample, not a ratio at
  // another P).
  std::optional<step::Verdict> verdict;
};

// The first case of the campaign's (seed, index) order, run at `point`,
// that is visibly wrong, shrunk with RapidCheck while it stays so; none for
// a correct point or when no case within max_cases is.
std::optional<StrategyWitness> find_strategy_witness(const StrategyWitnessOptions& options);

// Index of `strategy` in all_strategies().
std::size_t strategy_index(const step::Strategy& strategy);

}  // namespace infonce::properties
