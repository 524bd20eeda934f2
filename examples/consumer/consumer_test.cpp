// A property of the consumer's own, through the installed public API only:
// on generated cases run under a random fiber interleaving, every rank ends
// the step holding the same gradient, and it equals the full-batch reference
// within the tolerance rule |G - G_ref| <= atol + rtol * scale, checked here
// entry by entry rather than taken from the library's own verdict.
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/error.hpp"
#include "casefile/case.hpp"
#include "properties/case_spec.hpp"
#include "properties/generators.hpp"
#include "step/run_case.hpp"
#include "step/tolerance.hpp"

namespace {

using infonce::Case;
using infonce::properties::build_case;
using infonce::properties::case_spec_gen;
using infonce::properties::CaseSpec;
using infonce::properties::describe;
using infonce::properties::typical_limits;

// The largest |G - G_ref| over what the rule allows, across the entries of a
// D x F row-major gradient; scale = max over entries of the reference's sum of
// |terms| (which is max|G_ref| unless terms cancel).
double worst_tolerance_ratio(const std::vector<double>& grad,
                             const infonce::step::ReferenceValues& reference,
                             infonce::step::Tolerance tolerance) {
  const auto& ref = reference.grad;
  const double scale = ref.size() == 0 ? 0.0 : reference.grad_magnitude.cwiseAbs().maxCoeff();
  const double allowed = tolerance.atol + tolerance.rtol * scale;
  double worst = 0;
  for (Eigen::Index r = 0; r < ref.rows(); ++r) {
    for (Eigen::Index c = 0; c < ref.cols(); ++c) {
      const double value = grad[static_cast<std::size_t>(r * ref.cols() + c)];
      worst = std::max(worst, std::abs(value - ref(r, c)) / allowed);
    }
  }
  return worst;
}

TEST(Consumer, DistributedGradientEqualsReferenceUnderAnyInterleaving) {
  const bool ok = rc::check("every rank's gradient equals the reference", [] {
    const CaseSpec spec = *case_spec_gen(typical_limits());
    const auto schedule_seed = *rc::gen::arbitrary<std::uint64_t>();
    const Case c = build_case(spec);
    infonce::step::RunOptions options;
    options.schedule = {infonce::sim::ScheduleKind::random, schedule_seed};

    // A spec can describe an objective that is not defined (every logit
    // masked): the reference rejects it as bad input, and so does this test.
    infonce::step::ReferenceValues reference;
    try {
      reference = infonce::step::compute_case_reference(c);
    } catch (const infonce::InputError& e) {
      RC_DISCARD(e.what());
    }
    const infonce::step::DistributedResult run = infonce::step::run_on_fibers(c, {}, options);

    RC_LOG() << describe(spec) << " schedule " << schedule_seed << '\n';
    RC_ASSERT(run.grads.size() == static_cast<std::size_t>(c.mesh.world));
    for (const auto& grad : run.grads) RC_ASSERT(grad == run.grads.front());
    RC_ASSERT(run.grads.front().size() == static_cast<std::size_t>(reference.grad.size()));
    RC_ASSERT(worst_tolerance_ratio(run.grads.front(), reference,
                                    infonce::step::tolerance_for(c.scalar)) <= 1.0);
  });
  EXPECT_TRUE(ok);
}

}  // namespace
