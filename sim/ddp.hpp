// DDP's gradient handling: per-rank gradient buffers that accumulate over
// micro-steps with no communication (like `no_sync`), and one reduction after
// the last micro-step.
#pragma once

#include <span>
#include <vector>

#include "sim/communicator.hpp"

namespace infonce::sim {

enum class GradientReduction {
  mean_over_world,  // torch DDP: mean over all W ranks
  sum_over_group,   // Megatron calculate_per_token_loss: sum over the DP group
};

template <class Scalar>
class GradientBuffer {
 public:
  explicit GradientBuffer(std::size_t size) : values_(size, Scalar{0}) {}
  void accumulate(std::span<const Scalar> gradient);
  // One collective: mean over comm.world() (world all_reduce sum in world-rank
  // order, then divided by W) or sum over `dp_group` (in its group-rank order).
  void reduce(Communicator& comm, const Group& dp_group, GradientReduction mode);
  std::span<const Scalar> values() const { return values_; }

 private:
  std::vector<Scalar> values_;
};

}  // namespace infonce::sim
