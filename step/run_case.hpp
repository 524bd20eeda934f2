// Running one case: the distributed step on a backend, the full-batch
// reference, and the comparison of MODEL.md sections 5, 6 and 8.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "casefile/case.hpp"
#include "sim/fiber_simulation.hpp"
#include "step/mutants.hpp"
#include "step/tolerance.hpp"
#include "step/variant.hpp"

namespace infonce::step {

// What every world rank produced, widened to double for reporting.
struct DistributedResult {
  std::vector<double> losses;  // per world rank
  // Per world rank: W's D x F entries row-major, then the direct parameters'.
  std::vector<std::vector<double>> grads;
  std::int64_t padded_positives = 0;  // summed over ranks
};

struct ReferenceValues {
  double loss = 0;
  std::vector<double> shard_losses;  // use_batch = false
  Matrix<double> grad;
  Matrix<double> grad_magnitude;    // per entry, the sum of |terms| of grad
  std::vector<double> direct_grad;  // direct_parameter_names order; empty without any
  std::vector<double> direct_magnitude;
};

// The direct parameters as one parameter group (issue 13): the step's
// gradient of each against the reference's.
struct DirectParameterCheck {
  std::vector<std::string> names;
  std::vector<double> grad;     // rank 0's, after the reduction
  std::optional<double> ratio;  // <grad, ref> / <ref, ref>; unset when ref == 0
  double max_abs_err = 0;
  double error_scale = 0;  // max(|ref|, the sums of |terms|)
  bool matches = true;
};

struct ExpectCheck {
  bool met = false;
  double loss_error = 0;  // |loss - expect.loss|
  double grad_error = 0;  // max |grad - expect.grad|
};

struct CaseReport {
  double loss = 0;  // rank 0's reported value
  std::vector<double> losses;
  Matrix<double> grad;  // rank 0's gradient after the reduction
  ReferenceValues reference;
  std::optional<double> ratio;  // <grad, ref> / <ref, ref>; unset when ref == 0
  double max_abs_err = 0;
  double rel_err = 0;  // max_abs_err / max|reference grad| (SPEC section 8)
  // SPEC section 6 with the scale taken from the summands: max of the
  // reference's grad_magnitude, which is max|reference grad| unless terms
  // cancel. The only difference is summation order, whose error is bounded
  // by the summands, not by their (possibly cancelled) sum.
  double error_scale = 0;
  double scaled_err = 0;  // max_abs_err / error_scale
  std::int64_t padded_positives = 0;
  bool losses_equal = true;      // property 5: ranks holding the same batch report the same value
  bool grads_consistent = true;  // every rank holds the same reduced gradient
  bool loss_matches = true;      // each rank's loss equals the reference's
  bool grad_matches = true;      // property 1 for the gradient
  bool pass = true;              // all of the above, and no positive padded
  std::optional<ExpectCheck> expect;
  std::optional<DirectParameterCheck> direct;  // set when the case has direct parameters
  Tolerance tolerance{};
  // > 1: the case runs without the fix and was compared with reference / this.
  double reference_divided_by = 1;
};

// Whether the direct parameters (if any) match the reference.
inline bool direct_matches(const CaseReport& report) {
  return !report.direct || report.direct->matches;
}

// report.pass from the checks it is made of (after any of them changed).
inline void update_pass(CaseReport& report) {
  report.pass = report.losses_equal && report.grads_consistent && report.loss_matches &&
                report.grad_matches && direct_matches(report) && report.padded_positives == 0;
}

struct RunOptions {
  sim::Schedule schedule;
  std::optional<std::uint64_t> reduction_order_seed;
  // Ranks with bit-identical loss inputs share one evaluation of the loss
  // (step/shared_losses.hpp); off: every rank computes its own.
  bool share_identical_losses = false;
};

// The full-batch reference of the case (throws InputError for bad cases).
ReferenceValues compute_case_reference(const Case& c);

// The distributed step on the fiber simulator.
DistributedResult run_on_fibers(const Case& c, const StepVariant& variant,
                                const RunOptions& options);

// Compares a distributed result with the reference (and the case's expect).
CaseReport evaluate(const Case& c, const DistributedResult& distributed,
                    const ReferenceValues& reference);

// Reference, distributed run on fibers and evaluation in one call. A mutant
// (nullptr: none) changes the distributed run only; the reference is always
// the correct full-batch objective of `c`.
CaseReport run_case(const Case& c, const Mutant* mutant, const RunOptions& options);

// The case and program variant the distributed run uses under `mutant`.
// Without a mutant it refers to the caller's case (no copy: this runs for
// every campaign case), which must outlive it.
class DistributedSetup {
 public:
  DistributedSetup(const Case& c, const Mutant* mutant);
  const Case& distributed_case() const { return mutated_ ? *mutated_ : *original_; }
  StepVariant variant;

 private:
  const Case* original_;
  std::optional<Case> mutated_;  // the mutant's copy of the case
};
inline DistributedSetup distributed_setup(const Case& c, const Mutant* mutant) {
  return DistributedSetup(c, mutant);
}

}  // namespace infonce::step
