// The property campaign: case i of seed S is generated from its own random
// stream (so any case can be replayed alone, and a campaign can be split
// across workers or machines), every property is checked, and the first
// failure is shrunk to a small case.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <rapidcheck.h>

#include "properties/case_spec.hpp"
#include "properties/generators.hpp"
#include "properties/properties.hpp"

namespace infonce::properties {

// axis -> value -> cases
using Coverage = std::map<std::string, std::map<std::string, std::int64_t>>;

struct CampaignOptions {
  std::uint64_t seed = 1;
  std::int64_t cases = 1000;
  const step::Mutant* mutant = nullptr;
  GeneratorLimits limits = default_limits();
  std::int32_t max_shrink_evaluations = 3000;  // a limit on everything
};

struct CampaignFailure {
  std::int64_t case_index = 0;
  CaseSpec original;
  CaseSpec shrunk;
  std::int32_t shrink_steps = 0;  // accepted shrinks
  std::vector<PropertyFailure> failures;  // of the shrunk case
  Case shrunk_case;
  step::CaseReport report;
};

struct CampaignResult {
  std::int64_t cases_run = 0;   // generated and checked (discards included)
  std::int64_t discarded = 0;
  std::map<std::string, std::int64_t> property_checks;  // how often each property was checked
  // Worst gradient error of passing cases relative to the summand scale
  // (CaseReport::scaled_err), per scalar type.
  double worst_rel_err = 0;
  double worst_rel_err_float = 0;
  Coverage coverage;
  std::optional<CampaignFailure> failure;
};

// Size parameter and random stream of case `index`: a function of (seed, index) only.
int case_size(std::int64_t index);
rc::Shrinkable<CaseSpec> generate_case(std::uint64_t seed, std::int64_t index,
                                       const GeneratorLimits& limits);

void add_coverage(const CaseSpec& spec, Coverage& coverage);

// Shrinks a failing case while `property` still fails; returns the failure.
CampaignFailure shrink_failure(std::int64_t index, const rc::Shrinkable<CaseSpec>& failing,
                               const CaseVerdict& verdict, const CampaignOptions& options);

CampaignResult run_campaign(const CampaignOptions& options);

}  // namespace infonce::properties
