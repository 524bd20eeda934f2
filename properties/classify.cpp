#include "properties/classify.hpp"

#include <exception>

#include "base/error.hpp"
#include "properties/case_spec.hpp"
#include "properties/clip_case.hpp"
#include "properties/ntxent_case.hpp"
#include "properties/point_comparison.hpp"
#include "properties/siglip_case.hpp"
#include "step/run_case.hpp"

namespace infonce::properties {
namespace {

// A shape of the design: its mesh, its groups per shard and micro-step.
struct Design {
  const char* name;
  std::int32_t world, dp;
  std::vector<std::vector<std::vector<std::int32_t>>> negatives;  // [micro][shard][group] -> k
  bool use_batch = true;
  bool learnable_temperature = false;
};

std::vector<Design> designs() {
  return {
      {"P=2 W=2 equal batches", 2, 2, {{{1, 2}, {2, 1}}}},
      {"P=2 W=2 unequal batches", 2, 2, {{{1}, {2, 1, 1}}}},
      {"P=2 W=4 (2 replicas) equal batches", 4, 2, {{{1, 1}, {2, 2}}}},
      {"P=4 W=4 unequal batches", 4, 4, {{{1}, {1, 2}, {2}, {1, 1, 1}}}},
      {"P=2 W=2 equal batches, 2 micro-steps", 2, 2, {{{1}, {2}}, {{2, 1}, {1, 1}}}},
      {"P=1 W=2 (2 replicas)", 2, 1, {{{1, 2, 1}}}},
      {"P=3 W=3 unequal batches, learnable 1/T", 3, 3, {{{1}, {1, 1}, {2}}}, true, true},
      {"P=2 W=2 without a gather (use_batch false)", 2, 2, {{{1}, {2, 1}}}, false},
  };
}

CaseSpec spec_of(const Design& d, Reduction reduction) {
  CaseSpec spec;
  spec.world = d.world;
  spec.dp = d.dp;
  spec.negatives = d.negatives;
  spec.use_batch = d.use_batch;
  spec.reduction = reduction;
  spec.feature_dim = 3;
  spec.embedding_dim = 3;
  spec.temperature = 0.5;
  spec.data_seed = 29;
  spec.rng_seed = 29;
  return spec;
}

Case case_of(const Design& d, Reduction reduction, bool clip) {
  Case c = clip ? build_clip_case(spec_of(d, reduction)) : build_case(spec_of(d, reduction));
  c.learnable_temperature = d.learnable_temperature && !clip;
  return c;
}

// The design with one negative per query: for a step whose queries must all
// hold the same number of documents (its handshake's unequal_documents
// false). Its meshes and group counts, unequal batches included, stay.
Design one_negative_each(Design d) {
  for (auto& micro : d.negatives) {
    for (auto& shard : micro) {
      for (std::int32_t& k : shard) k = 1;
    }
  }
  return d;
}

std::optional<DesignedCase> designed_case(const Design& d, Reduction reduction, bool clip,
                                          const StepSupports& supports,
                                          std::vector<std::string>* outside) {
  std::string name = std::string(clip ? "clip " : "infonce ") + d.name + ", " +
                     std::string(step::name_of(reduction));
  if (clip && !d.use_batch) return std::nullopt;  // CLIP always gathers
  Case c = case_of(d, reduction, clip);
  std::optional<std::string> why = supports(c);
  if (why && !clip && why->find("unequal documents") != std::string::npos) {
    c = case_of(one_negative_each(d), reduction, clip);
    name += " (one negative per query)";
    why = supports(c);
  }
  if (why) {
    if (outside != nullptr) outside->push_back(name + ": " + *why);
    return std::nullopt;
  }
  return DesignedCase{name, std::move(c)};
}

// The rank program at `point` on `c` (the step's padding draws replayed).
step::DistributedResult at_point(Case c, const step::Strategy& point) {
  c.strategy = point;
  c.compensate = true;
  step::RunOptions options;
  options.share_identical_losses = true;
  return step::run_on_fibers(c, step::StepVariant{}, options);
}

void judge_every_point(const DesignedCase& d, const StepRun& run,
                       const step::ReferenceValues& reference, Classification& out) {
  Case judged = d.c;
  if (run.padding_draws) judged.padding_draws = *run.padding_draws;
  const PointAllowance allowance = point_allowance(judged, reference);
  for (PointClassification& p : out.points) {
    if (p.point.reduction != d.c.reduction) continue;
    ++p.judged;
    if (!p.ruled_out_by.empty() && !p.gradients_match) continue;
    std::optional<PointDifference> difference;
    bool gradients_match = false;
    try {
      step::DistributedResult point = at_point(judged, p.point);
      difference = compare_results(judged, run.result, point, allowance);
      point.losses = run.result.losses;  // the gradients alone
      gradients_match = !compare_results(judged, run.result, point, allowance).has_value();
    } catch (const std::exception& e) {
      difference = PointDifference{"the rank program cannot run it", e.what()};
    }
    const bool first_difference = p.ruled_out_by.empty();
    p.gradients_match = (first_difference || p.gradients_match) && gradients_match;
    if (difference && first_difference) {
      p.ruled_out_by = d.name + ": " + difference->cause + ": " + difference->detail;
    }
  }
}

}  // namespace

std::vector<DesignedCase> designed_cases(const StepSupports& supports, bool infonce, bool clip,
                                         bool learnable_temperature,
                                         std::vector<std::string>* outside) {
  std::vector<DesignedCase> out;
  for (const bool is_clip : {false, true}) {
    if (is_clip ? !clip : !infonce) continue;
    for (const Reduction reduction : {Reduction::mean, Reduction::sum}) {
      for (Design d : designs()) {
        if (d.learnable_temperature && !learnable_temperature) continue;
        if (auto c = designed_case(d, reduction, is_clip, supports, outside)) {
          out.push_back(std::move(*c));
        }
      }
    }
  }
  return out;
}

namespace {

// The designs that gather, as cases of a two-view or two-tower family built
// by `build` (NT-Xent, SigLIP); `temperature_designs`: the designs with a
// learnable temperature too (a family whose direct parameters are always
// there has no use for them).
std::vector<DesignedCase> designed_pair_family_cases(std::string_view family,
                                                     Case (*build)(const CaseSpec&),
                                                     bool temperature_designs,
                                                     const StepSupports& supports,
                                                     std::vector<std::string>* outside) {
  std::vector<DesignedCase> out;
  for (const Reduction reduction : {Reduction::mean, Reduction::sum}) {
    for (const Design& d : designs()) {
      if (!d.use_batch || (d.learnable_temperature && !temperature_designs)) continue;
      Case c = build(spec_of(d, reduction));
      c.learnable_temperature = d.learnable_temperature;
      const std::string name =
          std::string(family) + " " + d.name + ", " + std::string(step::name_of(reduction));
      if (const std::optional<std::string> why = supports(c)) {
        if (outside != nullptr) outside->push_back(name + ": " + *why);
        continue;
      }
      out.push_back(DesignedCase{name, std::move(c)});
    }
  }
  return out;
}

}  // namespace

std::vector<DesignedCase> designed_ntxent_cases(const StepSupports& supports,
                                                bool learnable_temperature,
                                                std::vector<std::string>* outside) {
  return designed_pair_family_cases("ntxent", build_ntxent_case, learnable_temperature, supports,
                                    outside);
}

std::vector<DesignedCase> designed_siglip_cases(const StepSupports& supports,
                                                std::vector<std::string>* outside) {
  return designed_pair_family_cases("siglip", build_siglip_case, false, supports, outside);
}

std::vector<step::Strategy> Classification::matching() const {
  std::vector<step::Strategy> out;
  for (const PointClassification& p : points) {
    if (p.matches) out.push_back(p.point);
  }
  return out;
}

Classification classify_step(const std::vector<DesignedCase>& cases, const StepRunner& run_step) {
  Classification out;
  const auto all = step::all_strategies();
  for (std::size_t i = 0; i < all.size(); ++i) out.points[i].point = all[i];
  for (const DesignedCase& d : cases) {
    step::ReferenceValues reference = step::compute_case_reference(d.c);
    StepRun run;
    try {
      run = run_step(d.c, reference);
    } catch (const StepDeclined& e) {
      out.declined.push_back(d.name + ": " + e.what());
      continue;
    } catch (const std::exception& e) {
      out.failed.push_back(d.name + ": " + e.what());
      continue;
    }
    out.ran.push_back(d.name);
    judge_every_point(d, run, run.reference ? *run.reference : reference, out);
  }
  for (PointClassification& p : out.points) {
    p.matches = p.judged > 0 && p.ruled_out_by.empty();
    p.gradients_match = p.gradients_match && !p.matches;
  }
  return out;
}

std::vector<std::string> consequences(const step::Strategy& point) {
  std::vector<std::string> out;
  for (const auto group : {step::ParameterGroup::encoders, step::ParameterGroup::direct}) {
    const auto said = [&](std::int32_t dp, std::int32_t world, bool equal, bool use_batch) {
      return step::describe(step::predict(point, group, {dp, world, equal, use_batch}));
    };
    out.push_back(std::string(step::name_of(group)) + " at P = 2, W = 4: equal batches: " +
                  said(2, 4, true, true) + "; unequal batches: " + said(2, 4, false, true) +
                  "; without a gather (InfoNCE use_batch false): " + said(2, 4, true, false) +
                  "; at P = 1: " + said(1, 2, true, true));
  }
  return out;
}

}  // namespace infonce::properties
