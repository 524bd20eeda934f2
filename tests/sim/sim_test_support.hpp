// Helpers shared by the sim tests: random groups, schedules, byte recording.
#pragma once

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "sim/communicator.hpp"
#include "sim/fiber_simulation.hpp"

namespace infonce::sim::testing {

// A non-empty subset of 0..world-1 in a random order, with a random id.
inline rc::Gen<Group> gen_group(std::int32_t world) {
  return rc::gen::exec([world] {
    std::vector<std::int32_t> members;
    std::vector<std::int32_t> keys;
    // One member for sure, each other rank with probability 2/3.
    const std::int32_t sure = *rc::gen::inRange(0, world);
    for (std::int32_t w = 0; w < world; ++w) {
      if (w == sure || *rc::gen::weightedElement<bool>({{1, false}, {2, true}})) {
        members.push_back(w);
        keys.push_back(*rc::gen::inRange(0, 1000));
      }
    }
    std::vector<std::size_t> order(members.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::ranges::stable_sort(order,
                             [&keys](std::size_t a, std::size_t b) { return keys[a] < keys[b]; });
    Group group{*rc::gen::inRange(0, 50), {}};
    for (const std::size_t i : order) group.world_ranks.push_back(members[i]);
    return group;
  });
}

inline rc::Gen<Schedule> gen_schedule() {
  return rc::gen::exec([] {
    const bool random = *rc::gen::arbitrary<bool>();
    return Schedule{random ? ScheduleKind::random : ScheduleKind::fifo,
                    *rc::gen::inRange<std::uint64_t>(0, 1u << 30)};
  });
}

// Appends the object representation of `values` to `out`.
template <class T>
void record(std::vector<std::byte>& out, std::span<const T> values) {
  const auto bytes = std::as_bytes(values);
  out.insert(out.end(), bytes.begin(), bytes.end());
}

template <class T>
void record_value(std::vector<std::byte>& out, const T& value) {
  record(out, std::span<const T>(&value, 1));
}

template <class T>
bool same_bits(std::span<const T> a, std::span<const T> b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size_bytes()) == 0);
}

}  // namespace infonce::sim::testing
