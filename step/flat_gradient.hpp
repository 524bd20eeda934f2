// The gradient a rank program accumulates over its micro-steps and reduces
// like DDP: the encoder weight's entries (row-major), then the direct
// parameters' (direct_parameter_names), one buffer and one collective for
// both, so a case without direct parameters runs exactly as before.
#pragma once

#include <initializer_list>
#include <span>
#include <vector>

#include "base/assert.hpp"
#include "casefile/strategy_value.hpp"
#include "loss/matrix.hpp"
#include "sim/ddp.hpp"

namespace infonce::step {

template <class Scalar>
class FlatGradient {
 public:
  FlatGradient(std::size_t weight_entries, std::size_t direct_count)
      : weight_entries_(weight_entries),
        direct_count_(direct_count),
        buffer_(weight_entries + direct_count) {}

  // One micro-step's contribution, already scaled.
  void add(const Matrix<Scalar>& grad_weight, std::initializer_list<Scalar> direct) {
    INFONCE_ASSERT(static_cast<std::size_t>(grad_weight.size()) == weight_entries_);
    INFONCE_ASSERT(direct.size() == direct_count_);
    if (direct_count_ == 0) {
      buffer_.accumulate(std::span<const Scalar>(grad_weight.data(), weight_entries_));
      return;
    }
    flat_.assign(grad_weight.data(), grad_weight.data() + weight_entries_);
    flat_.insert(flat_.end(), direct.begin(), direct.end());
    buffer_.accumulate(flat_);
  }

  // DDP's reduction of `reduction`: the mean over the W ranks, or the sum over
  // the DP group. Returns the reduced flat gradient.
  std::vector<Scalar> reduce(sim::Communicator& comm, const sim::Group& dp_group,
                             Reduction reduction) {
    buffer_.reduce(comm, dp_group,
                   reduction == Reduction::mean ? sim::GradientReduction::mean_over_world
                                                : sim::GradientReduction::sum_over_group);
    return {buffer_.values().begin(), buffer_.values().end()};
  }

 private:
  std::size_t weight_entries_;
  std::size_t direct_count_;
  sim::GradientBuffer<Scalar> buffer_;
  std::vector<Scalar> flat_;  // one micro-step's, when there are direct parameters
};

}  // namespace infonce::step
