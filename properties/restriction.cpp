#include "properties/restriction.hpp"

#include <algorithm>
#include <optional>

#include "properties/case_spec.hpp"
#include "properties/clip_case.hpp"
#include "properties/generators.hpp"
#include "properties/ntxent_case.hpp"
#include "properties/siglip_case.hpp"

namespace infonce::properties {
namespace {

// The handshake's dtype names (describe()'s are "f64" and "f32").
const char* dtype_name(ScalarType s) {
  return s == ScalarType::float64 ? "float64" : "float32";
}
const char* name_of(bool b) {
  return b ? "true" : "false";
}

// Without use_batch every shard needs a group of its own (the loss is per shard).
void give_every_shard_a_group(CaseSpec& spec) {
  const std::int32_t k = spec.hard_negatives > 0 ? 1 : 0;
  for (auto& micro : spec.negatives) {
    for (auto& shard : micro) {
      if (shard.empty()) shard.push_back(k);
    }
  }
}

// Every DP shard of a micro-step gets as many groups as the largest one
// (a new group takes the negatives of the micro-step's first group).
void equalize_group_counts(CaseSpec& spec) {
  for (auto& micro : spec.negatives) {
    std::size_t most = 0;
    std::optional<std::int32_t> first_k;
    for (const auto& shard : micro) {
      most = std::max(most, shard.size());
      if (!first_k && !shard.empty()) first_k = shard.front();
    }
    for (auto& shard : micro) shard.resize(most, first_k.value_or(0));
  }
}

// Every query gets the documents of the case's first query (its k).
void equalize_documents(CaseSpec& spec) {
  std::optional<std::int32_t> first_k;
  for (auto& micro : spec.negatives) {
    for (auto& shard : micro) {
      for (std::int32_t& k : shard) {
        if (!first_k) first_k = k;
        k = *first_k;
      }
    }
  }
}

}  // namespace

CaseFamily family_of(const CaseSpec& spec, const Restriction& r) {
  std::vector<CaseFamily> allowed;
  if (r.infonce) allowed.push_back(CaseFamily::infonce);
  if (r.clip) allowed.push_back(CaseFamily::clip);
  if (r.ntxent) allowed.push_back(CaseFamily::ntxent);
  if (r.siglip) allowed.push_back(CaseFamily::siglip);
  if (allowed.empty()) return CaseFamily::infonce;
  return allowed[static_cast<std::size_t>(spec.data_seed % allowed.size())];
}

bool builds_clip(const CaseSpec& spec, const Restriction& r) {
  return family_of(spec, r) == CaseFamily::clip;
}

Case build_restricted_case(const CaseSpec& spec, const Restriction& r) {
  Case c;
  switch (family_of(spec, r)) {
    case CaseFamily::infonce:
      c = build_case(spec);
      break;
    case CaseFamily::clip:
      c = build_clip_case(spec);
      break;
    case CaseFamily::ntxent:
      c = build_ntxent_case(spec);
      break;
    case CaseFamily::siglip:
      c = build_siglip_case(spec);
      break;
  }
  restrict_case(c, r);
  return c;
}

CaseSpec restrict_spec(CaseSpec spec, const Restriction& r) {
  if (r.use_batch) spec.use_batch = *r.use_batch;
  if (r.accumulation_normalize) spec.accumulation_normalize = *r.accumulation_normalize;
  if (r.reduction) spec.reduction = *r.reduction;
  if (r.gather) spec.gather = *r.gather;
  if (r.scalar) spec.scalar = *r.scalar;
  if (!r.hard_negatives) spec.hard_negatives = 0;
  if (!r.mask_fake_negative) spec.mask_fake_negative = false;
  // A CLIP case's logit bias is drawn with include_qq (properties/clip_case.hpp).
  if (builds_clip(spec, r) ? !r.logit_bias : !r.include_qq) spec.include_qq = false;
  if (!r.per_rank_rng) spec.per_rank_rng = false;
  if (!r.include_dd) spec.include_dd = false;
  if (!r.compensate_false) spec.compensate = true;
  if (!r.partial_window) spec.idle_steps = 0;
  // The generator already keeps dp <= max_world (restricted limits); the
  // replicas of each shard are cut here.
  const std::int32_t replicas =
      std::min({spec.world / spec.dp, r.max_replicas, std::max(1, r.max_world / spec.dp)});
  spec.world = spec.dp * replicas;
  spec.feature_dim = std::max(spec.feature_dim, r.min_dim);
  spec.embedding_dim = std::max(spec.embedding_dim, r.min_dim);
  if (!spec.use_batch) give_every_shard_a_group(spec);
  // Equal row counts: equal group counts with the same documents per query.
  if (!r.unequal_batches || !r.unequal_shapes) equalize_group_counts(spec);
  if (!r.unequal_documents || !r.unequal_shapes) equalize_documents(spec);
  return spec;
}

void restrict_case(Case& c, const Restriction& r) {
  c.loss.padding = r.padding;
}

std::vector<std::string> restricted_axes(const Restriction& r, const GeneratorLimits& limits) {
  std::vector<std::string> axes;
  if (r.max_world < limits.max_world) {
    axes.push_back("world <= " + std::to_string(r.max_world) + " (the distribution has " +
                   std::to_string(limits.max_world) + ")");
  }
  if (r.max_replicas < std::min(r.max_world, limits.max_world)) {
    axes.push_back("replicas <= " + std::to_string(r.max_replicas));
  }
  if (r.min_dim > 1) axes.push_back("F, D >= " + std::to_string(r.min_dim));
  if (r.use_batch) axes.push_back(std::string("use_batch: ") + name_of(*r.use_batch) + " only");
  if (!r.hard_negatives) axes.push_back("hard_negatives: unset only");
  if (r.hard_negatives && r.padding != loss::Padding::fixed) {
    axes.push_back("padding: legacy (the SUT's only mode)");
  }
  if (!r.mask_fake_negative) axes.push_back("mask_fake_negative: false only");
  if (!r.include_qq) axes.push_back("include_qq: false only");
  if (!r.include_dd) axes.push_back("include_dd: false only");
  if (r.reduction) axes.push_back(std::string("reduction: ") + name_of(*r.reduction) + " only");
  if (r.gather) axes.push_back(std::string("gather: ") + name_of(*r.gather) + " only");
  if (r.scalar) axes.push_back(std::string("scalar: ") + dtype_name(*r.scalar) + " only");
  if (!r.compensate_false) axes.push_back("compensate: true only (the SUT runs only its own fix)");
  if (!r.partial_window) {
    axes.push_back("accumulation.window: full windows only (not in extension_keys)");
  }
  if (r.accumulation_normalize) {
    axes.push_back(std::string("accumulation_normalize: ") + name_of(*r.accumulation_normalize) +
                   " only");
  }
  if (!r.unequal_batches) {
    axes.push_back("unequal batches: none (equal group counts per micro-step)");
  }
  if (!r.unequal_documents) axes.push_back("documents per query: the same for every query");
  if (!r.unequal_shapes) {
    axes.push_back("shapes: the same on every rank (equal groups and documents per query)");
  }
  if (!r.per_rank_rng) axes.push_back("rng.mode: synced only");
  if (r.clip || r.ntxent || r.siglip) {
    std::string families;
    for (const auto& [allowed, name] :
         {std::pair{r.infonce, "infonce"}, std::pair{r.clip, "clip"}, std::pair{r.ntxent, "ntxent"},
          std::pair{r.siglip, "siglip"}}) {
      if (allowed) families += std::string(families.empty() ? "" : " and ") + name;
    }
    if (r.infonce && r.clip && !r.ntxent && !r.siglip) {
      axes.push_back("family: infonce and clip (a case with an odd data seed: CLIP)");
    } else {
      axes.push_back("family: " + families +
                     (r.infonce + r.clip + r.ntxent + r.siglip == 1
                          ? std::string(" only")
                          : std::string(" (by data seed)")));
    }
  }
  if (r.clip && !r.logit_bias) axes.push_back("clip.logit_bias: unset only");
  return axes;
}

}  // namespace infonce::properties
