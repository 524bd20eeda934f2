// The rank program: what the trainer does on one rank for one optimizer step
// (MODEL.md section 3), written against the Communicator interface only, so the
// fiber simulator and the MPI backend run the same code.
#pragma once

#include <cstdint>
#include <vector>

#include "casefile/case.hpp"
#include "sim/communicator.hpp"
#include "step/shared_losses.hpp"
#include "step/variant.hpp"

namespace infonce::step {

template <class Scalar>
struct RankOutput {
  Scalar reported_loss = 0;  // summed over micro-steps, after GA normalisation
  // After the DDP reduction: W's D x F entries row-major, then the direct
  // parameters' (direct_parameter_names) in order.
  std::vector<Scalar> grad;
  std::int64_t padded_positives = 0;  // padding rows that were the group's own positive
};

// Runs every micro-step of `c` on rank comm.world_rank() and the final
// gradient reduction. Throws InputError for what the trainer would reject.
// `shared` (the fiber backend's, or nullptr): where ranks of this step share
// the evaluation of a loss on bit-identical inputs.
template <class Scalar>
RankOutput<Scalar> run_rank_program(sim::Communicator& comm, const Case& c,
                                    const StepVariant& variant,
                                    SharedLosses<Scalar>* shared = nullptr);

// The backward scale s of SPEC section 3 (with the variant's deviations).
double compensation_scale(const Case& c, const StepVariant& variant);

// What each micro-step's loss and gradient are divided by: A with GA
// normalisation (the micro-steps that ran, SPEC section 12), else 1 (with the
// variant's deviations).
double accumulation_divisor(const Case& c, const StepVariant& variant);

}  // namespace infonce::step
