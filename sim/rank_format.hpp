// Short, deterministic text for rank lists in error messages (internal to sim/).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "sim/communicator.hpp"

namespace infonce::sim::detail {

// "{0..7}", "{1,3,..,15}", "{7,6,..,0}", "{0,2,5}", "{0..3,9,12..20}", long lists cut
// after `max_items` items with "+N more".
std::string format_ranks(std::span<const std::int32_t> ranks, std::size_t max_items = 12);
// "group 3 {0,2,4}"
std::string format_group(const Group& group);

}  // namespace infonce::sim::detail
