// A step run outside the harness (check --sut): the campaign generates,
// shrinks and reports as usual, and asks this for each case's verdict.
#pragma once

#include <cstdint>

#include "casefile/case.hpp"
#include "properties/properties.hpp"

namespace infonce::properties {

class ExternalStep {
 public:
  virtual ~ExternalStep() = default;
  // The case as the external step is asked to run it (what is saved and reported).
  virtual Case adapt(Case c) const = 0;
  // The verdict of an adapted case on worker `job` (0 <= job < the campaign's
  // jobs). The campaign never runs two cases on one job at the same time.
  // `options`: the case's, of which an external step uses the oracle's mode
  // and the case index.
  virtual CaseVerdict check(const Case& c, std::int32_t job, const PropertyOptions& options) = 0;
};

}  // namespace infonce::properties
