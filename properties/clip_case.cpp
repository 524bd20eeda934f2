#include "properties/clip_case.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "base/rng.hpp"

namespace infonce::properties {
namespace {

// The spec's feature style on one tower's rows, where it applies to CLIP.
void apply_style(Rng& rng, FeatureStyle style, Matrix<double>& rows) {
  for (Eigen::Index i = 0; i < rows.rows(); ++i) {
    switch (style) {
      case FeatureStyle::normal:
      case FeatureStyle::threshold_ties:  // a mask tie: InfoNCE only
        return;
      case FeatureStyle::duplicated:
        if (i > 0 && rng.below(3) == 0)
          rows.row(i) = rows.row(static_cast<Eigen::Index>(rng.below(i)));
        break;
      case FeatureStyle::zero_rows:
        if (rng.below(4) == 0) rows.row(i).setZero();
        break;
      case FeatureStyle::collinear:
        if (i > 0 && rng.below(2) == 0) rows.row(i) = (0.5 + 1.5 * rng.unit()) * rows.row(0);
        break;
      case FeatureStyle::magnitudes:
        rows.row(i) *= std::pow(10.0, 8.0 * rng.unit() - 4.0);
        break;
    }
  }
}

}  // namespace

Case build_clip_case(const CaseSpec& spec) {
  Rng rng(spec.data_seed ^ 0xc11bULL);
  Case c;
  c.mesh = {spec.world, spec.dp};
  c.reduction = spec.reduction;
  c.gather = spec.gather;
  c.compensate = spec.compensate;
  c.scalar = spec.scalar;
  c.accumulation_steps = spec.accumulation_steps();
  c.accumulation_normalize = spec.accumulation_normalize;
  const std::int32_t features = spec.feature_dim;
  c.weight = normal_matrix(rng, spec.embedding_dim, 2 * features);
  ClipSettings clip;
  clip.image_features = features;
  clip.image_normalize = spec.normalize;
  clip.text_normalize = spec.normalize && !spec.include_dd;
  clip.log_logit_scale = std::log(1.0 / spec.temperature);
  if (spec.include_qq) clip.logit_bias = rng.normal();
  for (const auto& micro : spec.negatives) {
    auto& shards = clip.batches.emplace_back();
    for (const auto& groups : micro) {
      const auto pairs = static_cast<std::int64_t>(std::max<std::size_t>(groups.size(), 1));
      ClipShardBatch shard{normal_matrix(rng, pairs, features),
                           normal_matrix(rng, pairs, features)};
      apply_style(rng, spec.features, shard.image);
      apply_style(rng, spec.features, shard.text);
      shards.push_back(std::move(shard));
    }
  }
  c.clip = std::move(clip);
  validate_case(c);
  return c;
}

std::string describe_clip(const CaseSpec& spec) {
  std::ostringstream out;
  out << describe_mesh(spec) << " pairs=[";
  for (std::size_t m = 0; m < spec.negatives.size(); ++m) {
    out << (m ? "," : "") << "[";
    for (std::size_t d = 0; d < spec.negatives[m].size(); ++d) {
      out << (d ? "," : "") << std::max<std::size_t>(spec.negatives[m][d].size(), 1);
    }
    out << "]";
  }
  out << "] F=" << spec.feature_dim << " D=" << spec.embedding_dim
      << " normalize=" << spec.normalize << "/" << (spec.normalize && !spec.include_dd)
      << " T=" << spec.temperature << " bias=" << spec.include_qq
      << " reduction=" << name_of(spec.reduction) << " gather=" << name_of(spec.gather)
      << " scalar=" << name_of(spec.scalar) << " data_seed=" << spec.data_seed
      << " features=" << name_of(spec.features);
  return out.str();
}

}  // namespace infonce::properties
