// An external step judged at a strategy point (check --strategies POINT --sut):
// its loss on every rank and both parameter groups' gradients against what
// the harness's own rank program gives at that point, case by case. A
// prediction says only how a point's gradient relates to the reference (a
// ratio, or none); a SUT can fit the prediction and still not run the point
// (an exactly correct SUT at a point that predicts no single ratio).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "casefile/case.hpp"
#include "step/run_case.hpp"
#include "step/tolerance.hpp"

namespace infonce::properties {

// How far the step may round from the rank program: the step tolerance on
// the values' scale, plus what a softmax's cancelled terms round by (they are
// summed in another order), scaled with the point's multiple of the
// reference. `direct_*`: per direct parameter.
struct PointAllowance {
  step::Tolerance tolerance{};
  double encoder_scale = 0;         // the reference gradient's size before cancellation
  double encoder_cancellation = 0;  // the rounding allowance of its cancelled terms
  std::vector<double> direct_scale;
  std::vector<double> direct_cancellation;
  double loss_cancellation = 0;  // the loss's: a logsumexp rounds with its largest logit
};

struct PointDifference {
  std::string cause;   // what differs, e.g. "loss differs from the point's rank program"
  std::string detail;  // one line: where and by how much
};

// The rank program at `c`'s strategy point (c.strategy set; replaying the
// case's padding_draws) against `observed`, the step's result; nullopt when
// every rank's loss and the flat gradient (W's entries, then the direct
// parameters') agree.
// `expected_losses`, when given, replace the point's reported losses (a step
// with a rank-local reported loss).
std::optional<PointDifference> compare_with_point(
    const Case& c, const step::DistributedResult& observed, const PointAllowance& allowance,
    const std::vector<double>* expected_losses = nullptr);

// Whether a reported loss agrees with the expected one within `allowance`
// (two non-finite values agree when they are the same; NaN: both NaN).
bool losses_agree(double observed, double expected, const PointAllowance& allowance);

// The same comparison against a result already run at the point.
std::optional<PointDifference> compare_results(const Case& c,
                                               const step::DistributedResult& observed,
                                               const step::DistributedResult& point,
                                               const PointAllowance& allowance);

}  // namespace infonce::properties
