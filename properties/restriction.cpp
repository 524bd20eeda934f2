#include "properties/restriction.hpp"

#include <algorithm>

#include "properties/case_spec.hpp"
#include "properties/generators.hpp"

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

}  // namespace

CaseSpec restrict_spec(CaseSpec spec, const Restriction& r) {
  if (r.use_batch) spec.use_batch = *r.use_batch;
  if (r.accumulation_normalize) spec.accumulation_normalize = *r.accumulation_normalize;
  if (r.reduction) spec.reduction = *r.reduction;
  if (r.gather) spec.gather = *r.gather;
  if (r.scalar) spec.scalar = *r.scalar;
  if (!r.hard_negatives) spec.hard_negatives = 0;
  if (!r.mask_fake_negative) spec.mask_fake_negative = false;
  if (!r.include_qq) spec.include_qq = false;
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
  if (r.padding != loss::Padding::fixed) axes.push_back("padding: legacy (the SUT's only mode)");
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
  return axes;
}

}  // namespace infonce::properties
