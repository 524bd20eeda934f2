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

  // The case the job checks after this one, as far as the campaign knows
  // (a failure or the clock may end the run first).
  struct Upcoming {
    const Case& c;
    const PropertyOptions& options;
  };
  // check(), told what comes next: a step may start `next` while it judges
  // `c`. The verdicts must be check()'s.
  virtual CaseVerdict check_before(const Case& c, std::int32_t job, const PropertyOptions& options,
                                   const Upcoming& next) {
    static_cast<void>(next);
    return check(c, job, options);
  }
};

}  // namespace infonce::properties
