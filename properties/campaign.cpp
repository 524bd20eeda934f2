#include "properties/campaign.hpp"

#include <algorithm>
#include <sstream>

#include "base/rng.hpp"

namespace infonce::properties {
namespace {

std::string bucket(std::int32_t n) {
  if (n <= 2) return std::to_string(n);
  std::int32_t hi = 4;
  while (hi < n) hi *= 2;
  return std::to_string(hi / 2 + 1) + "-" + std::to_string(hi);
}

bool has_property(const CaseVerdict& verdict, const std::string& property) {
  return std::any_of(verdict.failures.begin(), verdict.failures.end(),
                     [&](const PropertyFailure& f) { return f.property == property; });
}

void tally(const CaseVerdict& verdict, const CaseSpec& spec, CampaignResult& result) {
  if (verdict.discarded) {
    ++result.discarded;
    return;
  }
  for (const char* p : {kGradientMatches, kScheduleIndependent, kEqualLoss, kPaddingSkipsPositive,
                        kNoCrash}) {
    ++result.property_checks[p];
  }
  if (verdict.uncompensated_checked) ++result.property_checks[kUncompensatedRatio];
  if (verdict.code_paths_checked) ++result.property_checks[kCodePathsAgree];
  if (verdict.failures.empty()) {
    double& worst = spec.scalar == ScalarType::float64 ? result.worst_rel_err
                                                       : result.worst_rel_err_float;
    worst = std::max(worst, verdict.report.scaled_err);
  }
}

}  // namespace

int case_size(std::int64_t index) { return static_cast<int>(index % 100); }

rc::Shrinkable<CaseSpec> generate_case(std::uint64_t seed, std::int64_t index,
                                       const GeneratorLimits& limits) {
  const rc::Random random(derive_seed(seed, static_cast<std::uint64_t>(index)));
  return case_spec_gen(limits)(random, case_size(index));
}

void add_coverage(const CaseSpec& spec, Coverage& coverage) {
  std::int32_t groups = 0;
  bool unequal_shards = false;
  for (const auto& micro : spec.negatives) {
    for (const auto& shard : micro) {
      groups += static_cast<std::int32_t>(shard.size());
      unequal_shards = unequal_shards || shard.size() != micro[0].size();
    }
  }
  coverage["world"][bucket(spec.world)]++;
  coverage["dp"][bucket(spec.dp)]++;
  coverage["replicas"][bucket(spec.world / spec.dp)]++;
  coverage["use_batch"][spec.use_batch ? "true" : "false"]++;
  coverage["hard_negatives"][spec.hard_negatives ? std::to_string(spec.hard_negatives) : "unset"]++;
  coverage["mask_fake_negative"][spec.mask_fake_negative ? "true" : "false"]++;
  if (spec.mask_fake_negative) {
    std::ostringstream margin;
    margin << spec.fake_neg_margin;
    coverage["fake_neg_margin"][margin.str()]++;
  }
  coverage["include_qq"][spec.include_qq ? "true" : "false"]++;
  coverage["include_dd"][spec.include_dd ? "true" : "false"]++;
  std::ostringstream temperature;
  temperature << spec.temperature;
  coverage["temperature"][temperature.str()]++;
  coverage["accumulation_steps"][std::to_string(spec.accumulation_steps())]++;
  coverage["accumulation_normalize"][spec.accumulation_normalize ? "true" : "false"]++;
  coverage["reduction"][spec.reduction == Reduction::mean ? "mean" : "sum"]++;
  coverage["gather"][spec.gather == GatherPath::object ? "object" : "tensor"]++;
  coverage["scalar"][spec.scalar == ScalarType::float64 ? "float64" : "float32"]++;
  coverage["encoder_normalize"][spec.normalize ? "true" : "false"]++;
  coverage["groups_total"][bucket(groups)]++;
  coverage["unequal_group_counts"][unequal_shards ? "true" : "false"]++;
}

CampaignFailure shrink_failure(std::int64_t index, const rc::Shrinkable<CaseSpec>& failing,
                               const CaseVerdict& verdict, const CampaignOptions& options) {
  const std::string property = verdict.failures.front().property;
  const PropertyOptions property_options{options.mutant, derive_seed(options.seed, ~0ULL)};
  CampaignFailure failure;
  failure.case_index = index;
  failure.original = failing.value();
  rc::Shrinkable<CaseSpec> current = failing;
  CaseVerdict current_verdict = verdict;
  std::int32_t evaluations = 0;
  bool shrunk = true;
  while (shrunk && evaluations < options.max_shrink_evaluations) {
    shrunk = false;
    auto candidates = current.shrinks();
    while (auto candidate = candidates.next()) {
      if (++evaluations > options.max_shrink_evaluations) break;
      const CaseVerdict candidate_verdict =
          check_case(build_case(candidate->value()), property_options);
      if (!candidate_verdict.discarded && has_property(candidate_verdict, property)) {
        current = *candidate;
        current_verdict = candidate_verdict;
        ++failure.shrink_steps;
        shrunk = true;
        break;
      }
    }
  }
  failure.shrunk = current.value();
  failure.shrunk_case = build_case(failure.shrunk);
  failure.failures = current_verdict.failures;
  failure.report = current_verdict.report;
  return failure;
}

CampaignResult run_campaign(const CampaignOptions& options) {
  CampaignResult result;
  const PropertyOptions property_options{options.mutant, derive_seed(options.seed, ~0ULL)};
  for (std::int64_t index = 0; index < options.cases; ++index) {
    const rc::Shrinkable<CaseSpec> shrinkable = generate_case(options.seed, index, options.limits);
    const CaseSpec spec = shrinkable.value();
    const CaseVerdict verdict = check_case(build_case(spec), property_options);
    ++result.cases_run;
    add_coverage(spec, result.coverage);
    tally(verdict, spec, result);
    if (!verdict.discarded && !verdict.failures.empty()) {
      result.failure = shrink_failure(index, shrinkable, verdict, options);
      break;
    }
  }
  return result;
}

}  // namespace infonce::properties
