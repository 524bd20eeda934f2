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
// The fiber simulator hands every member of an object gather the same
// immutable result (sim::GatheredObjects), so what a rank derives from that
// result alone (the concatenated shards, the parsed group layout) is the same
// for every member: SharedGathers keeps it once per gather result, and a rank
// whose own live rows are bit-identical to its gathered slot takes the
// concatenation as its global batch (the assembly would produce those bits).
// An input shared that way carries its hash, computed once, so a rank looks an
// entry up in O(log entries) instead of hashing and comparing O(N D) bytes;
// inputs held by the same object are the same bits (objects are immutable and
// kept alive by the cache), other objects are compared in full.
//
// One instance per simulated step, used by the fibers of one thread only.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "loss/infonce.hpp"
#include "sim/communicator.hpp"

namespace infonce::step {

// An input of the loss held by an immutable object that ranks share, with its
// hash (SharedLosses::hash_of) computed once.
template <class T>
struct SharedInput {
  std::shared_ptr<const T> value;
  std::uint64_t hash = 0;
};

// What ranks derive from one gather result, built by the first rank that asks
// and kept with the result (so its address identifies it while it is stored).
// Past kMaxEntries results a value is built and not stored.
template <class Value>
class GatherMemo {
 public:
  static constexpr std::size_t kMaxEntries = 64;

  // The value for `objects` and `extra` (a further input of `build`), built by
  // build() -> Value if not stored.
  std::shared_ptr<const Value> get(const sim::GatheredObjects& objects, std::int64_t extra,
                                   const std::function<Value()>& build) {
    const Key key{objects.bytes().data(), objects.bytes().size(), objects.size(), extra};
    if (const auto it = entries_.find(key); it != entries_.end()) return it->second.value;
    auto value = std::make_shared<const Value>(build());
    if (entries_.size() < kMaxEntries && key.data != nullptr) {
      entries_.emplace(key, Entry{objects, value});
    }
    return value;
  }

 private:
  struct Key {
    const std::byte* data;
    std::size_t bytes;
    std::size_t objects;
    std::int64_t extra;
    auto operator<=>(const Key&) const = default;
  };
  struct Entry {
    sim::GatheredObjects objects;  // keeps the buffer, so the address, alive
    std::shared_ptr<const Value> value;
  };
  std::map<Key, Entry> entries_;
};

// One object gather's shards concatenated in slot order, and where each starts.
template <class Scalar>
struct ConcatenatedShards {
  SharedInput<Matrix<Scalar>> embeddings;
  std::vector<std::int64_t> row_offsets;  // slot i: [row_offsets[i], row_offsets[i + 1])
};

// The group layout parsed from one gather's concatenated labels.
struct GatheredGroups {
  SharedInput<loss::GroupLayout> layout;
  std::int64_t padded_positives = 0;
};

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
  // The same for inputs held by shared objects, with their hashes.
  std::shared_ptr<const loss::LossAndGradient<Scalar>> loss_and_gradient(
      std::int32_t micro, const SharedInput<Matrix<Scalar>>& embeddings,
      const SharedInput<loss::GroupLayout>& layout, const loss::LossSettings& settings,
      loss::CodePath path = loss::CodePath::automatic);

  static std::uint64_t hash_of(const Matrix<Scalar>& embeddings);
  static std::uint64_t hash_of(const loss::GroupLayout& layout);

  // Per gather result: the concatenated shards (keyed with the column count)
  // and the parsed layout (keyed with the row count).
  GatherMemo<ConcatenatedShards<Scalar>> concatenations;
  GatherMemo<GatheredGroups> layouts;

  std::int64_t evaluations() const { return evaluations_; }  // losses actually computed
  std::int64_t reuses() const { return reuses_; }

 private:
  struct Entry {
    std::int32_t micro;
    std::shared_ptr<const Matrix<Scalar>> embeddings;
    std::shared_ptr<const loss::GroupLayout> layout;
    loss::LossSettings settings;
    loss::CodePath path;
    std::shared_ptr<const loss::LossAndGradient<Scalar>> result;
  };
  // Looks the inputs up; on a miss evaluates the loss and stores the entry,
  // copying an input that no shared object holds (owner null).
  std::shared_ptr<const loss::LossAndGradient<Scalar>> lookup(
      std::int32_t micro, const Matrix<Scalar>& embeddings, std::uint64_t embeddings_hash,
      std::shared_ptr<const Matrix<Scalar>> embeddings_owner, const loss::GroupLayout& layout,
      std::uint64_t layout_hash, std::shared_ptr<const loss::GroupLayout> layout_owner,
      const loss::LossSettings& settings, loss::CodePath path);

  std::deque<Entry> entries_;
  std::multimap<std::uint64_t, std::size_t> index_;  // input hash -> entries_ index
  std::int64_t evaluations_ = 0;
  std::int64_t reuses_ = 0;
};

extern template class SharedLosses<double>;
extern template class SharedLosses<float>;

}  // namespace infonce::step
