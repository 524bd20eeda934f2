// SPEC section 5, items 1-6, as RapidCheck properties over generated cases,
// classified by axis with RC_TAG so the output shows what was covered.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>

#include "properties/campaign.hpp"
#include "properties/case_spec.hpp"
#include "properties/generators.hpp"
#include "properties/properties.hpp"
#include "tests/rapidcheck_seed.hpp"

namespace infonce::properties {
namespace {

bool fails(const CaseVerdict& verdict, const char* property) {
  return std::any_of(verdict.failures.begin(), verdict.failures.end(),
                     [&](const PropertyFailure& f) { return f.property == property; });
}

// Generates a case, tags it, checks every property; discards what the
// reference rejects (every logit masked under a negative margin).
CaseVerdict checked_case(const CaseSpec& spec, const step::Mutant* mutant = nullptr) {
  RC_TAG(spec.dp == 1 ? "P=1" : "P>1", spec.world > spec.dp ? "replicas" : "no replicas",
         spec.use_batch ? "use_batch" : "local",
         spec.hard_negatives ? "hard_negatives" : "all negatives",
         spec.scalar == ScalarType::float64 ? "f64" : "f32");
  const CaseVerdict verdict = check_case(build_case(spec), property_options_for(mutant, spec));
  RC_PRE(!verdict.discarded);
  return verdict;
}

RC_GTEST_PROP(SpecProperties, CompensatedGradientEqualsReference, ()) {
  const CaseSpec spec = *case_spec_gen(default_limits());
  const CaseVerdict verdict = checked_case(spec);
  RC_ASSERT(!fails(verdict, kNoCrash));
  RC_ASSERT(!fails(verdict, kGradientMatches));
  // The campaign's own criterion (SPEC section 6 with the summands' scale):
  // max |error| <= atol + rtol * scale, i.e. the scaled error within rtol.
  const step::CaseReport& r = verdict.report;
  const bool within = r.error_scale > 0
                          ? r.scaled_err <= r.tolerance.rtol + r.tolerance.atol / r.error_scale
                          : r.max_abs_err <= r.tolerance.atol;
  RC_ASSERT(within);
}

RC_GTEST_PROP(SpecProperties, UncompensatedRatioIsOneOverP, ()) {
  CaseSpec spec = *case_spec_gen(default_limits());
  spec.use_batch = true;
  spec.reduction = Reduction::mean;
  RC_PRE(spec.dp > 1);
  const CaseVerdict verdict = checked_case(spec);
  RC_ASSERT(verdict.uncompensated_checked);
  RC_ASSERT(!fails(verdict, kUncompensatedRatio));
}

RC_GTEST_PROP(SpecProperties, BatchedAndLoopPathsAgree, ()) {
  const CaseSpec spec = *case_spec_gen(default_limits());
  const CaseVerdict verdict = checked_case(spec);
  RC_CLASSIFY(verdict.code_paths_checked, "both paths apply");
  RC_ASSERT(!fails(verdict, kCodePathsAgree));
}

RC_GTEST_PROP(SpecProperties, ResultsIndependentOfSchedule, ()) {
  const CaseSpec spec = *case_spec_gen(default_limits());
  const CaseVerdict verdict = checked_case(spec);
  RC_ASSERT(!fails(verdict, kScheduleIndependent));
}

RC_GTEST_PROP(SpecProperties, EveryRankReportsTheSameLoss, ()) {
  const CaseSpec spec = *case_spec_gen(default_limits());
  const CaseVerdict verdict = checked_case(spec);
  RC_ASSERT(!fails(verdict, kEqualLoss));
}

RC_GTEST_PROP(SpecProperties, PaddingNeverSelectsThePositive, ()) {
  CaseSpec spec = *case_spec_gen(default_limits());
  RC_PRE(spec.hard_negatives > 0);
  const CaseVerdict verdict = checked_case(spec);
  RC_ASSERT(!fails(verdict, kPaddingSkipsPositive));
}

}  // namespace
}  // namespace infonce::properties
