#include "sim/communicator.hpp"

namespace infonce::sim {

std::int32_t Group::rank_of(std::int32_t world_rank) const {
  for (std::int32_t i = 0; i < size(); ++i) {
    if (world_ranks[static_cast<std::size_t>(i)] == world_rank) return i;
  }
  return -1;
}

}  // namespace infonce::sim
