#include "sim/communicator.hpp"

#include <string>
#include <utility>

#include "base/assert.hpp"
#include "base/error.hpp"

namespace infonce::sim {

std::int32_t Group::rank_of(std::int32_t world_rank) const {
  for (std::int32_t i = 0; i < size(); ++i) {
    if (world_ranks[static_cast<std::size_t>(i)] == world_rank) return i;
  }
  return -1;
}

GatheredObjects::GatheredObjects(std::shared_ptr<const void> owner,
                                 std::span<const std::byte> bytes,
                                 std::span<const std::int64_t> offsets)
    : owner_(std::move(owner)), bytes_(bytes), offsets_(offsets) {
  INFONCE_ASSERT(offsets_.empty() || (offsets_.front() == 0 &&
                                      offsets_.back() == static_cast<std::int64_t>(bytes_.size())));
}

namespace {

struct OwnedObjects {
  std::vector<std::byte> bytes;
  std::vector<std::int64_t> offsets;
};

GatheredObjects owning(std::shared_ptr<const OwnedObjects> owned) {
  const std::span<const std::byte> bytes(owned->bytes);
  const std::span<const std::int64_t> offsets(owned->offsets);
  return {std::move(owned), bytes, offsets};
}

}  // namespace

GatheredObjects::GatheredObjects(std::vector<std::byte> bytes, std::vector<std::int64_t> offsets)
    : GatheredObjects(owning(std::make_shared<const OwnedObjects>(
          OwnedObjects{std::move(bytes), std::move(offsets)}))) {}

namespace {

void count(std::vector<std::int64_t>& counts, std::int32_t world_rank) {
  INFONCE_ASSERT(world_rank >= 0);
  if (counts.size() <= static_cast<std::size_t>(world_rank)) {
    counts.resize(static_cast<std::size_t>(world_rank) + 1, 0);
  }
  ++counts[static_cast<std::size_t>(world_rank)];
}

std::int64_t at(const std::vector<std::int64_t>& counts, std::size_t i) {
  return i < counts.size() ? counts[i] : 0;
}

}  // namespace

void Communicator::count_sent(std::int32_t to_world_rank) {
  count(sent_, to_world_rank);
}
void Communicator::count_received(std::int32_t from_world_rank) {
  count(received_, from_world_rank);
}

void Communicator::check_messages_delivered() {
  const auto ranks = static_cast<std::size_t>(world_size());
  // Row r of the gathered matrix: what rank r sent to each rank, then what it
  // received from each.
  std::vector<std::int64_t> mine(2 * ranks, 0);
  for (std::size_t w = 0; w < ranks; ++w) {
    mine[w] = at(sent_, w);
    mine[ranks + w] = at(received_, w);
  }
  const std::vector<std::int64_t> all = all_gather(world(), mine);
  for (std::size_t from = 0; from < ranks; ++from) {
    for (std::size_t to = 0; to < ranks; ++to) {
      const std::int64_t sent = all[from * 2 * ranks + to];
      const std::int64_t received = all[to * 2 * ranks + ranks + from];
      if (sent == received) continue;
      throw SimulationError("messages: world rank " + std::to_string(from) + " sent " +
                            std::to_string(sent) + " to world rank " + std::to_string(to) +
                            ", which received " + std::to_string(received) + " of them");
    }
  }
}

}  // namespace infonce::sim
