// RapidCheck generators for every axis of a data-parallel InfoNCE step. Small
// generators composed into one for CaseSpec; each shrinks toward the smallest
// world, fewest micro-steps, groups and negatives, smallest dims, and the
// plainest settings.
#pragma once

#include <cstdint>

#include <rapidcheck.h>

#include "properties/case_spec.hpp"
#include "properties/restriction.hpp"

namespace infonce::properties {

struct GeneratorLimits {
  std::int32_t max_world = 64;
  std::int32_t max_groups = 4;     // per shard and micro-step
  std::int32_t max_negatives = 4;  // per group
  std::int32_t max_dim = 8;        // F and D
  std::int32_t max_accumulation = 3;
  // What an external SUT can run (check --sut); the default restricts nothing.
  Restriction restriction{};
};

// The default distribution: world up to 64, P any divisor.
GeneratorLimits default_limits();
// The "typical" distribution: world <= 8, <= 3 groups per rank, <= 3 negatives, F, D <= 6.
GeneratorLimits typical_limits();

rc::Gen<CaseSpec> case_spec_gen(const GeneratorLimits& limits);

}  // namespace infonce::properties
