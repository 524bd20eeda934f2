// `infonce-sim classify --sut CMD`: which points of the strategy matrix a
// step runs. The step runs a designed set of cases (as its handshake allows:
// P, W, replicas, unequal batches, accumulation, a learnable temperature,
// both families), each once; the harness's rank program runs every case at
// every point of the case's reduction; a point matches when the step's loss
// on every rank and both parameter groups' gradients are the rank program's
// on every case judged at it (properties/point_comparison.hpp).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "casefile/case.hpp"
#include "properties/strategy_campaign.hpp"
#include "step/strategy.hpp"

namespace infonce::properties {

struct DesignedCase {
  std::string name;  // one line, e.g. "infonce P=2 W=4 equal batches A=1"
  Case c;            // without a strategy key: the step runs its own point
};

// What a step can run: nullopt, or why not (a handshake's outside_supports).
using StepSupports = std::function<std::optional<std::string>(const Case&)>;

// The designed cases the step supports, for each of its reductions and
// families; `outside` lists the ones it cannot run, with the reason.
std::vector<DesignedCase> designed_cases(const StepSupports& supports, bool infonce, bool clip,
                                         bool learnable_temperature,
                                         std::vector<std::string>* outside = nullptr);
// The same designs on the NT-Xent family (SPEC section 14; every design that
// gathers), for a step that runs it.
std::vector<DesignedCase> designed_ntxent_cases(const StepSupports& supports,
                                                bool learnable_temperature,
                                                std::vector<std::string>* outside = nullptr);
// The same designs on the SigLIP family (SPEC section 15; every design that
// gathers; its log scale and bias are always parameters).
std::vector<DesignedCase> designed_siglip_cases(const StepSupports& supports,
                                                std::vector<std::string>* outside = nullptr);

struct PointClassification {
  step::Strategy point;
  std::int64_t judged = 0;   // cases of its reduction the step ran
  bool matches = false;      // judged > 0 and none differed
  std::string ruled_out_by;  // the first case that differed, and how (one line)
  // Every case's gradients (both parameter groups) were the point's; what
  // differed is only the reported loss (a loss scaled or computed apart from
  // the gradient's, e.g. W x the point's).
  bool gradients_match = false;
};

struct Classification {
  std::vector<std::string> ran;                               // the designed cases the step ran
  std::vector<std::string> declined;                          // "case: reason"
  std::vector<std::string> failed;                            // "case: the step's failure"
  std::array<PointClassification, step::kPointCount> points;  // all_strategies() order
  std::vector<step::Strategy> matching() const;
};

Classification classify_step(const std::vector<DesignedCase>& cases, const StepRunner& run_step);

// What follows from a point per parameter group, one line each, at P = 2,
// W = 4 (step/strategy.hpp's predictions; `strategies --dp P --world W` for others).
std::vector<std::string> consequences(const step::Strategy& point);

}  // namespace infonce::properties
