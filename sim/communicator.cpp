#include "sim/communicator.hpp"

#include <utility>

#include "base/assert.hpp"

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

}  // namespace infonce::sim
