#include "sim/ddp.hpp"

#include "base/assert.hpp"

namespace infonce::sim {

template <class Scalar>
void GradientBuffer<Scalar>::accumulate(std::span<const Scalar> gradient) {
  INFONCE_ASSERT(gradient.size() == values_.size());
  for (std::size_t i = 0; i < values_.size(); ++i) values_[i] += gradient[i];
}

// mean_over_world: g = (g_0 + g_1 + ... + g_{W-1}) / W, the sum in world-rank
// order (the world all_reduce's order), then one division by W in Scalar
// arithmetic. (torch DDP instead multiplies each rank's gradient by 1/W before
// summing; the two agree to rounding.)
template <class Scalar>
void GradientBuffer<Scalar>::reduce(Communicator& comm, const Group& dp_group,
                                    GradientReduction mode) {
  switch (mode) {
    case GradientReduction::mean_over_world: {
      comm.all_reduce(comm.world(), std::span<Scalar>(values_), ReduceOp::sum);
      const auto world = static_cast<Scalar>(comm.world_size());
      for (Scalar& value : values_) value /= world;
      return;
    }
    case GradientReduction::sum_over_group:
      comm.all_reduce(dp_group, std::span<Scalar>(values_), ReduceOp::sum);
      return;
  }
  INFONCE_ASSERT(false);
}

template class GradientBuffer<double>;
template class GradientBuffer<float>;

}  // namespace infonce::sim
