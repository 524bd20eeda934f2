// The one interface between a rank program and its collectives. The fiber
// simulator and the MPI backend both implement it, so the rank program is the
// same code on both. It knows nothing of losses: it moves numbers and bytes.
//
// Semantics follow real libraries: every member of a group must call the same
// collective in the same order with compatible sizes; results are always in
// group-rank order, never in arrival order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <span>
#include <vector>

#include "base/assert.hpp"

namespace infonce::sim {

enum class ReduceOp { sum, mean };

// An ordered set of world ranks; a member's group rank is its position.
struct Group {
  std::int32_t id = 0;  // 0 is the world group; split() numbers the others
  std::vector<std::int32_t> world_ranks;

  std::int32_t size() const { return static_cast<std::int32_t>(world_ranks.size()); }
  // Group rank of `world_rank`, or -1 if it is not a member.
  std::int32_t rank_of(std::int32_t world_rank) const;
};

// all_gather_object's result: objects[i] is member i's serialized object, a
// view into one immutable buffer. The fiber simulator builds that buffer once
// per collective and every member's result shares it, so a gather costs O(P)
// per member rather than P separate vectors; copying a GatheredObjects copies
// a pointer. The views stay valid as long as any copy of the result lives.
class GatheredObjects {
 public:
  class Iterator {
   public:
    using value_type = std::span<const std::byte>;
    using difference_type = std::ptrdiff_t;
    using iterator_concept = std::forward_iterator_tag;
    using iterator_category = std::input_iterator_tag;  // *it is a value, not a reference

    Iterator() = default;
    Iterator(const GatheredObjects* objects, std::size_t index)
        : objects_(objects), index_(index) {}
    value_type operator*() const { return (*objects_)[index_]; }
    Iterator& operator++() {
      ++index_;
      return *this;
    }
    Iterator operator++(int) {
      Iterator before = *this;
      ++index_;
      return before;
    }
    bool operator==(const Iterator& other) const { return index_ == other.index_; }

   private:
    const GatheredObjects* objects_ = nullptr;
    std::size_t index_ = 0;
  };

  GatheredObjects() = default;
  // The objects back to back in `bytes`: object i is [offsets[i], offsets[i + 1]),
  // offsets ascending from 0 to bytes.size(). `owner` keeps both alive.
  GatheredObjects(std::shared_ptr<const void> owner, std::span<const std::byte> bytes,
                  std::span<const std::int64_t> offsets);
  // Takes ownership of the buffer and offsets (one allocation for both).
  GatheredObjects(std::vector<std::byte> bytes, std::vector<std::int64_t> offsets);

  std::size_t size() const { return offsets_.empty() ? 0 : offsets_.size() - 1; }
  bool empty() const { return size() == 0; }
  std::span<const std::byte> operator[](std::size_t i) const {
    INFONCE_ASSERT(i < size());
    const auto begin = static_cast<std::size_t>(offsets_[i]);
    const auto end = static_cast<std::size_t>(offsets_[i + 1]);
    INFONCE_ASSERT(begin <= end);
    return bytes_.subspan(begin, end - begin);
  }
  std::span<const std::byte> front() const { return (*this)[0]; }
  Iterator begin() const { return {this, 0}; }
  Iterator end() const { return {this, size()}; }
  // Every object back to back, in member order.
  std::span<const std::byte> bytes() const { return bytes_; }

 private:
  std::shared_ptr<const void> owner_;
  std::span<const std::byte> bytes_;
  std::span<const std::int64_t> offsets_;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual std::int32_t world_rank() const = 0;
  virtual std::int32_t world_size() const = 0;
  virtual Group world() const = 0;

  // Collective over the world (MPI_Comm_split): ranks with the same color form
  // a group, ordered by key then world rank. A negative color (MPI_UNDEFINED)
  // joins no group and gets Group{-1, {}}.
  virtual Group split(std::int32_t color, std::int32_t key) = 0;

  // Fixed-size all-gather: every member gives the same count; the result is
  // the members' values concatenated in group-rank order.
  virtual std::vector<double> all_gather(const Group& group, std::span<const double> mine) = 0;
  virtual std::vector<float> all_gather(const Group& group, std::span<const float> mine) = 0;
  virtual std::vector<std::int64_t> all_gather(const Group& group,
                                               std::span<const std::int64_t> mine) = 0;

  // All-gather with sizes agreed beforehand (torch's tensor path, after the
  // shape exchange): member i must give counts[i] values.
  virtual std::vector<double> all_gather_v(const Group& group, std::span<const double> mine,
                                           std::span<const std::int64_t> counts) = 0;
  virtual std::vector<float> all_gather_v(const Group& group, std::span<const float> mine,
                                          std::span<const std::int64_t> counts) = 0;
  virtual std::vector<std::int64_t> all_gather_v(const Group& group,
                                                 std::span<const std::int64_t> mine,
                                                 std::span<const std::int64_t> counts) = 0;

  // all_gather_object: serialized objects of any size; result[i] is member i's.
  virtual GatheredObjects all_gather_object(const Group& group,
                                            std::span<const std::byte> mine) = 0;

  // In place; every member gives the same count and op. Sum order: group-rank
  // order, left to right; mean = that sum / member count (see fiber_simulation.hpp).
  virtual void all_reduce(const Group& group, std::span<double> values, ReduceOp op) = 0;
  virtual void all_reduce(const Group& group, std::span<float> values, ReduceOp op) = 0;

  // Reduce-scatter with shard sizes agreed beforehand: the backward of an
  // autograd all_gather_v (torch's reduce_scatter over a list of shards). Every
  // member gives sum(counts) values, shard i being the counts[i] values at
  // offset counts[0] + ... + counts[i-1]; member i receives shard i summed
  // element-wise over the members, in all_reduce's order (group-rank order,
  // left to right, in the element type). Every member passes the same counts.
  virtual std::vector<double> reduce_scatter_v(const Group& group, std::span<const double> values,
                                               std::span<const std::int64_t> counts) = 0;
  virtual std::vector<float> reduce_scatter_v(const Group& group, std::span<const float> values,
                                              std::span<const std::int64_t> counts) = 0;

  // `root` is a group rank (MPI convention); every member gives the same count.
  virtual void broadcast(const Group& group, std::span<double> values, std::int32_t root) = 0;
  virtual void broadcast(const Group& group, std::span<std::byte> values, std::int32_t root) = 0;

  virtual void barrier(const Group& group) = 0;

  // Point-to-point messages (SPEC section 16). `peer` is a group rank of
  // `group`, not the caller's own. send is buffered: it returns at once, and
  // the messages from one sender to one receiver on one group arrive in the
  // order they were sent. recv blocks until that order's next message has
  // arrived, which must hold exactly out.size() values of out's element type.
  // A recv that no send can satisfy, a message of another size, type or group,
  // and a message never received (check_messages_delivered, or the end of a
  // fiber run) are SimulationErrors naming both ranks, never a hang.
  virtual void send(const Group& group, std::int32_t peer, std::span<const double> values) = 0;
  virtual void send(const Group& group, std::int32_t peer, std::span<const float> values) = 0;
  virtual void recv(const Group& group, std::int32_t peer, std::span<double> out) = 0;
  virtual void recv(const Group& group, std::int32_t peer, std::span<float> out) = 0;

  // Collective over the world: every message sent so far has been received.
  // A step calls it after its last message. Throws SimulationError naming the
  // first (sender, receiver) pair, in world-rank order, whose counts differ.
  void check_messages_delivered();

 protected:
  // Kept by the implementations' send and recv (after the message is
  // checked), read by check_messages_delivered.
  void count_sent(std::int32_t to_world_rank);
  void count_received(std::int32_t from_world_rank);

 private:
  std::vector<std::int64_t> sent_, received_;  // by world rank, grown on demand
};

}  // namespace infonce::sim
