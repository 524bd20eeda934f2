// Ranks of one simulated step that compute the same global loss on the same
// bits share one evaluation of it.
//
// With use_batch every rank gathers every shard, so the ranks' loss inputs (the
// assembled global batch and its group layout) are usually bit-identical, and
// the loss, a pure function, gives bit-identical outputs: computing it P times
// only repeats the O(N^2 D) arithmetic. The first rank to reach a micro-step's
// loss computes it; a rank whose inputs are equal to a stored entry (compared
// in full, bytes and layout, not by hash alone) takes that result. Every rank
// still runs its own program around it: encoder, gather, assembly, labels,
// padding draws, its own rows' slice, encoder backward, scaling, accumulation
// and the DDP reduction. A rank whose inputs differ (a bug, a mutant) computes
// its own loss. The campaign's self-check reruns steps without sharing and
// compares every bit (properties/campaign.cpp).
//
// One instance per simulated step, used by the fibers of one thread only.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>

#include "loss/infonce.hpp"

namespace infonce::step {

template <class Scalar>
class SharedLosses {
 public:
  // Distinct inputs stored per step: beyond this (every rank different, as
  // under some mutants) ranks compute unshared, so memory stays bounded.
  static constexpr std::size_t kMaxEntries = 64;

  // The loss and dL/dE of `embeddings` under `layout` and `settings` for
  // micro-step `micro`, by code path `path`. Every input is part of the key:
  // an entry is reused only for the same micro-step, bits, layout, settings
  // and path.
  std::shared_ptr<const loss::LossAndGradient<Scalar>> loss_and_gradient(
      std::int32_t micro, const Matrix<Scalar>& embeddings, const loss::GroupLayout& layout,
      const loss::LossSettings& settings, loss::CodePath path = loss::CodePath::automatic);

  std::int64_t evaluations() const { return evaluations_; }  // losses actually computed
  std::int64_t reuses() const { return reuses_; }

 private:
  struct Entry {
    std::int32_t micro;
    Matrix<Scalar> embeddings;
    loss::GroupLayout layout;
    loss::LossSettings settings;
    loss::CodePath path;
    std::shared_ptr<const loss::LossAndGradient<Scalar>> result;
  };
  const Entry* find(std::uint64_t key, const Entry& wanted) const;

  std::deque<Entry> entries_;
  std::multimap<std::uint64_t, std::size_t> index_;  // input hash -> entries_ index
  std::int64_t evaluations_ = 0;
  std::int64_t reuses_ = 0;
};

extern template class SharedLosses<double>;
extern template class SharedLosses<float>;

}  // namespace infonce::step
