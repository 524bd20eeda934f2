// Issue 30, the harness's own sensitivity: a reference that rejects valid
// input is a failure, not a silent discard; a campaign that discards too much
// fails; shrinking lowers W and P and drops empty shards.
//
// The slips are injected through the existing seams: an ExternalStep (the
// campaign asks it for each case's verdict, as `check --sut` does) whose
// verdict comes from the production reference_or_discard, handed a reference
// that throws where the real one would not. Production code has no hook.
#include <gtest/gtest.h>

#include "base/error.hpp"
#include "budget.hpp"
#include "properties/campaign.hpp"
#include "properties/campaign_report.hpp"
#include "properties/structural_shrink.hpp"

namespace infonce::properties {
namespace {

std::int32_t groups_in(const Case& c) {
  std::int32_t groups = 0;
  for (const auto& shards : c.batches) {
    for (const auto& shard : shards) groups += static_cast<std::int32_t>(shard.negative_counts.size());
  }
  return groups;
}

std::int32_t groups_in(const CaseSpec& spec) {
  std::int32_t groups = 0;
  for (const auto& micro : spec.negatives) {
    for (const auto& shard : micro) groups += static_cast<std::int32_t>(shard.size());
  }
  return groups;
}

// The reference with a slip: it rejects every case of two or more groups,
// with the message the real one gives a fully masked row.
step::ReferenceValues reference_rejecting_two_groups(const Case& c) {
  if (groups_in(c) >= 2) throw InputError("group 1: every logit is masked");
  return step::compute_case_reference(c);
}

// A step judged only on whether its reference was computed: every failure
// it reports comes from reference_or_discard.
class RejectingReference : public ExternalStep {
 public:
  Case adapt(Case c) const override { return c; }
  CaseVerdict check(const Case& c, std::int32_t, const PropertyOptions& options) override {
    CaseVerdict verdict;
    verdict.schedule_checked = false;
    reference_or_discard(c, options.oracle, verdict, reference_rejecting_two_groups);
    return verdict;
  }
};

TEST(ReferenceRejection, OfValidInputFailsTheCampaignShrunk) {
  RejectingReference step;
  CampaignOptions options;
  options.seed = 1;
  options.cases = 500;
  options.limits = typical_limits();
  options.external = &step;
  const CampaignResult result = run_campaign(options);
  ASSERT_TRUE(result.failure.has_value()) << result.discarded << " discarded";
  const CampaignFailure& failure = *result.failure;
  EXPECT_EQ(failure.failures.front().property, kReferenceAcceptsValid);
  EXPECT_NE(failure.failures.front().detail.find("every logit is masked"), std::string::npos);
  // The smallest case the slip needs: two groups on one rank.
  EXPECT_EQ(groups_in(failure.shrunk), 2) << describe(failure.shrunk);
  EXPECT_EQ(failure.shrunk.world, 1) << describe(failure.shrunk);
  EXPECT_EQ(failure.shrunk.dp, 1) << describe(failure.shrunk);
}

TEST(ReferenceRejection, WithoutTheOracleExceedsTheDiscardBudget) {
  RejectingReference step;
  CampaignOptions options;
  options.seed = 1;
  options.cases = 500;
  options.limits = typical_limits();
  options.oracle = OracleMode::off;
  options.external = &step;
  CampaignReport report;
  report.result = run_campaign(options);
  EXPECT_FALSE(report.result.failure.has_value());
  EXPECT_GT(report.result.discarded, report.result.cases_run / 2);
  const auto budget = report.discard_budget_failure();
  ASSERT_TRUE(budget.has_value());
  EXPECT_NE(budget->find("commonest reason"), std::string::npos) << *budget;
  EXPECT_NE(budget->find("group N: every logit is masked"), std::string::npos) << *budget;
  EXPECT_FALSE(report.passed());
  EXPECT_EQ(report.result.discards_by_reason.at("group N: every logit is masked"),
            report.result.discarded);
}

TEST(ReferenceRejection, TheCorrectReferenceStaysWithinTheBudget) {
  CampaignOptions options;
  options.seed = 3;
  options.cases = scaled_budget(1000);
  CampaignReport report;
  report.result = run_campaign(options);
  ASSERT_FALSE(report.result.failure.has_value())
      << report.result.failure->failures.front().property << ": "
      << report.result.failure->failures.front().detail;
  EXPECT_TRUE(report.passed()) << report.discard_budget_failure().value_or("");
  EXPECT_GT(report.result.property_checks.count(kReferenceAcceptsValid), 0u);
  std::int64_t by_reason = 0;
  for (const auto& [reason, count] : report.result.discards_by_reason) by_reason += count;
  EXPECT_EQ(by_reason, report.result.discarded);
}

TEST(DiscardBudget, NamesTheShareAndTheCommonestReason) {
  CampaignReport report;
  report.result.cases_run = 1000;
  report.result.discarded = 231;
  report.result.discards_by_reason = {{"group N: every logit is masked", 200},
                                      {"embeddings must be finite", 31}};
  EXPECT_EQ(report.discard_budget_failure().value_or(""),
            "DISCARD BUDGET EXCEEDED: 23.1% of 1000 cases discarded (budget 10%); commonest "
            "reason (200): group N: every logit is masked");
  report.result.discarded = 100;  // exactly the budget: within it
  EXPECT_FALSE(report.discard_budget_failure().has_value());
  report.result.cases_run = 99;  // too few cases to judge a share
  report.result.discarded = 99;
  EXPECT_FALSE(report.discard_budget_failure().has_value());
}

TEST(DiscardBudget, KindsTakeTheNumbersOut) {
  EXPECT_EQ(discard_kind("group 12: every logit is masked"), "group N: every logit is masked");
  EXPECT_EQ(discard_kind("temperature = 1e-05 must be finite"),
            "temperature = Ne-N must be finite");
  EXPECT_EQ(discard_kind("no digits"), "no digits");
}

// --- shrinking: a failure that needs three groups, whatever the mesh.

class NeedsThreeGroups : public ExternalStep {
 public:
  Case adapt(Case c) const override { return c; }
  CaseVerdict check(const Case& c, std::int32_t, const PropertyOptions&) override {
    CaseVerdict verdict;
    verdict.schedule_checked = false;
    if (groups_in(c) >= 3) verdict.failures.push_back({kGradientMatches, "three groups"});
    return verdict;
  }
};

CaseSpec ten_ranks_seven_empty() {
  CaseSpec spec;
  spec.world = 10;
  spec.dp = 10;
  spec.negatives = {{{}, {}, {}, {1}, {}, {2}, {}, {}, {1}, {}}};
  spec.feature_dim = 2;
  spec.embedding_dim = 2;
  spec.data_seed = 7;
  return spec;
}

TEST(StructuralShrink, ThreeGroupsOnEmptyShardsShrinkToWorldOne) {
  NeedsThreeGroups step;
  CampaignOptions options;
  options.external = &step;
  const CaseSpec spec = ten_ranks_seven_empty();
  const CaseVerdict verdict = step.check(build_case(spec), 0, {});
  ASSERT_FALSE(verdict.failures.empty());
  // No RapidCheck shrinks at all: only the structural ones can help.
  const CampaignFailure failure =
      shrink_failure(0, rc::shrinkable::just(spec), verdict, options);
  EXPECT_EQ(failure.shrunk.world, 1) << describe(failure.shrunk);
  EXPECT_EQ(failure.shrunk.dp, 1);
  // The global batch in DP order, on one rank.
  EXPECT_EQ(failure.shrunk.negatives,
            (std::vector<std::vector<std::vector<std::int32_t>>>{{{1, 2, 1}}}));
}

TEST(StructuralShrink, OneRankKeepsTheGlobalBatch) {
  const CaseSpec spec = ten_ranks_seven_empty();
  const std::vector<CaseSpec> candidates = structural_shrinks(spec, Restriction{});
  ASSERT_FALSE(candidates.empty());
  const Case wide = build_case(spec);
  const Case one = build_case(candidates.front());
  ASSERT_EQ(one.mesh.world, 1);
  Eigen::Index total = 0;
  for (const auto& shard : wide.batches[0]) total += shard.features.rows();
  Matrix<double> rows(total, spec.feature_dim);
  Eigen::Index at = 0;
  for (const auto& shard : wide.batches[0]) {
    rows.middleRows(at, shard.features.rows()) = shard.features;
    at += shard.features.rows();
  }
  EXPECT_TRUE(one.batches[0][0].features == rows);
  EXPECT_TRUE(one.weight == wide.weight);
}

TEST(StructuralShrink, EveryCandidateIsAValidSpec) {
  for (std::int64_t index = 0; index < 300; ++index) {
    const CaseSpec spec = generate_spec(5, index, default_limits());
    ASSERT_TRUE(valid_spec(spec)) << describe(spec);
    for (const CaseSpec& candidate : structural_shrinks(spec, Restriction{})) {
      ASSERT_TRUE(valid_spec(candidate)) << describe(spec) << " -> " << describe(candidate);
      EXPECT_LE(candidate.world, spec.world);
      EXPECT_LE(candidate.dp, spec.dp);
      EXPECT_NO_THROW(build_case(candidate)) << describe(candidate);
    }
  }
}

// --- --oracle every means every case: float32 cases with the fake-negative
// mask are judged, except a mask decision within float32's rounding.

CaseVerdict checked_with_the_oracle(const CaseSpec& spec, std::int64_t index) {
  PropertyOptions options = property_options_for(nullptr, spec);
  options.oracle = OracleMode::every;
  options.case_index = index;
  return check_case(build_case(spec), options);
}

TEST(OracleEvery, JudgesFloat32CasesWithTheMask) {
  // The same 200 cases under the sanitizers too (~1 s there): at a twentieth of them the
  // share below is a statement about 10 cases (7 judged of 10 failed "more than 3/4").
  const std::int64_t wanted = 200;
  std::int64_t seen = 0, judged = 0;
  for (std::int64_t index = 0; seen < wanted; ++index) {
    const CaseSpec spec = generate_spec(1, index, typical_limits());
    if (spec.scalar != ScalarType::float32 || !spec.mask_fake_negative) continue;
    const CaseVerdict verdict = checked_with_the_oracle(spec, index);
    if (verdict.discarded) continue;
    ++seen;
    ASSERT_TRUE(verdict.failures.empty())
        << "case " << index << ": " << verdict.failures.front().property << ": "
        << verdict.failures.front().detail;
    judged += verdict.oracle_checked ? 1 : 0;
  }
  // Near ties are rare outside the threshold-ties features (a sixth of the cases).
  EXPECT_GT(judged, seen * 3 / 4) << judged << " of " << seen;
}

TEST(OracleEvery, ANearTieInFloat32IsCountedNotJudged) {
  // Seed 1, typical, case 7774: float32, unnormalised rows scaled by up to
  // 10^4, margin -0.05. In float32, s_t - 0.05 rounds to s_t, so the target
  // is kept and the loss is 0; in long double the target is masked and the
  // loss is +inf. Both right for their precision: a tie, not a failure.
  const CaseSpec spec = generate_spec(1, 7774, typical_limits());
  ASSERT_EQ(spec.scalar, ScalarType::float32);
  ASSERT_TRUE(spec.mask_fake_negative);
  ASSERT_EQ(spec.fake_neg_margin, -0.05);
  const CaseVerdict verdict = checked_with_the_oracle(spec, 7774);
  EXPECT_TRUE(verdict.failures.empty()) << verdict.failures.front().detail;
  EXPECT_FALSE(verdict.oracle_checked);
}

}  // namespace
}  // namespace infonce::properties
