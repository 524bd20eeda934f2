#include "properties/case_spec.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "base/assert.hpp"
#include "base/rng.hpp"

namespace infonce::properties {

Matrix<double> normal_matrix(Rng& rng, std::int64_t rows, std::int64_t cols) {
  Matrix<double> m(rows, cols);
  for (std::int64_t i = 0; i < m.size(); ++i) m.data()[i] = rng.normal();
  return m;
}

Case pair_family_case(const CaseSpec& spec) {
  Case c;
  c.mesh = {spec.world, spec.dp};
  c.reduction = spec.reduction;
  c.gather = spec.gather;
  c.compensate = spec.compensate;
  c.scalar = spec.scalar;
  c.accumulation_steps = spec.accumulation_steps();
  c.accumulation_normalize = spec.accumulation_normalize;
  return c;
}

void apply_pair_style(Rng& rng, FeatureStyle style, Matrix<double>& rows) {
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

namespace {

// Reshapes normal rows into the adversarial style (see FeatureStyle).
void apply_style(Rng& rng, FeatureStyle style, const std::vector<std::int32_t>& negatives,
                 Matrix<double>& features) {
  const Eigen::Index rows = features.rows();
  switch (style) {
    case FeatureStyle::normal:
      return;
    case FeatureStyle::duplicated:
      for (Eigen::Index i = 1; i < rows; ++i) {
        if (rng.below(3) == 0) {
          features.row(i) = features.row(static_cast<Eigen::Index>(rng.below(i)));
        }
      }
      return;
    case FeatureStyle::threshold_ties: {
      Eigen::Index start = 0;  // group g is rows [q, p, n_1..n_k] from `start`
      for (const std::int32_t k : negatives) {
        if (k > 0)
          features.row(start + 2 + static_cast<Eigen::Index>(rng.below(k))) =
              features.row(start + 1);
        start += k + 2;
      }
      return;
    }
    case FeatureStyle::zero_rows:
      for (Eigen::Index i = 0; i < rows; ++i) {
        if (rng.below(4) == 0) features.row(i).setZero();
      }
      return;
    case FeatureStyle::collinear:
      for (Eigen::Index i = 1; i < rows; ++i) {
        const double factor = (rng.below(2) == 0 ? -1.0 : 1.0) * (0.5 + 1.5 * rng.unit());
        if (rng.below(2) == 0) features.row(i) = factor * features.row(0);
      }
      return;
    case FeatureStyle::magnitudes:
      for (Eigen::Index i = 0; i < rows; ++i) {
        features.row(i) *= std::pow(10.0, 8.0 * rng.unit() - 4.0);
      }
      return;
  }
}

// The groups' negative counts that DP shard `d` pads in micro-step `micro`
// (MODEL.md section 3): with a gather every shard's in DP order, otherwise
// the shard's own. Read from the layout the generator wrote, not parsed
// through loss/: generation must not run the code under test.
std::vector<std::int32_t> padded_negative_counts(const Case& c, std::size_t micro, std::int32_t d) {
  const bool gather = c.loss.use_batch && c.mesh.dp > 1;
  std::vector<std::int32_t> counts;
  for (std::int32_t s = gather ? 0 : d; s < (gather ? c.mesh.dp : d + 1); ++s) {
    const auto& own = c.batches[micro][static_cast<std::size_t>(s)].negative_counts;
    counts.insert(counts.end(), own.begin(), own.end());
  }
  return counts;
}

// The recorded-draws axis: arbitrary valid draws in the order the step's
// generators draw them (step/recorded_padding.hpp), each index uniform in
// [0, k) from Rng(seed), not from any padding generator, so a step must use
// exactly the draws the case records. A group with k < H negatives takes
// H - k draws; with a gather every DP shard gets the same list, as synced
// generators draw, so the step keeps one objective.
loss::RecordedDraws arbitrary_padding_draws(const Case& c, std::uint64_t seed) {
  const auto dp = static_cast<std::size_t>(c.mesh.dp);
  loss::RecordedDraws draws(static_cast<std::size_t>(c.accumulation_steps),
                            std::vector<std::vector<std::int32_t>>(dp));
  const std::int32_t hard_negatives = *c.loss.hard_negatives;
  const bool gather = c.loss.use_batch && c.mesh.dp > 1;
  Rng rng(seed);
  for (std::size_t m = 0; m < static_cast<std::size_t>(c.micro_steps_run()); ++m) {
    auto& micro = draws[m];
    for (std::int32_t d = 0; d < (gather ? 1 : c.mesh.dp); ++d) {
      for (const std::int32_t k : padded_negative_counts(c, m, d)) {
        INFONCE_ASSERT(k >= 1);  // the generator gives every group a negative under H
        for (std::int32_t extra = 0; extra < hard_negatives - k; ++extra) {
          micro[static_cast<std::size_t>(d)].push_back(
              static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(k))));
        }
      }
    }
    if (gather) std::fill(micro.begin() + 1, micro.end(), micro[0]);
  }
  return draws;
}

loss::ShardBatch shard_batch(Rng& rng, const std::vector<std::int32_t>& negatives,
                             std::int32_t feature_dim, FeatureStyle style) {
  loss::ShardBatch batch;
  batch.negative_counts = negatives;
  std::int64_t rows = 0;
  for (std::int32_t k : negatives) rows += k + 2;
  batch.features = normal_matrix(rng, rows, feature_dim);
  apply_style(rng, style, negatives, batch.features);
  return batch;
}

}  // namespace

const char* name_of(Reduction r) {
  return r == Reduction::mean ? "mean" : "sum";
}
const char* name_of(GatherPath g) {
  return g == GatherPath::object ? "object" : "tensor";
}
const char* name_of(ScalarType s) {
  return s == ScalarType::float64 ? "f64" : "f32";
}

const char* name_of(FeatureStyle style) {
  switch (style) {
    case FeatureStyle::normal:
      return "normal";
    case FeatureStyle::duplicated:
      return "duplicated";
    case FeatureStyle::threshold_ties:
      return "threshold-ties";
    case FeatureStyle::zero_rows:
      return "zero-rows";
    case FeatureStyle::collinear:
      return "collinear";
    case FeatureStyle::magnitudes:
      return "magnitudes";
  }
  return "?";
}

Case build_case(const CaseSpec& spec) {
  Case c;
  c.mesh = {spec.world, spec.dp};
  c.reduction = spec.reduction;
  c.gather = spec.gather;
  c.compensate = spec.compensate;
  c.loss.temperature = spec.temperature;
  c.loss.use_batch = spec.use_batch;
  if (spec.hard_negatives > 0) c.loss.hard_negatives = spec.hard_negatives;
  c.loss.padding = loss::Padding::fixed;
  c.loss.mask_fake_negative = spec.mask_fake_negative;
  c.loss.fake_neg_margin = spec.fake_neg_margin;
  c.loss.include_qq = spec.include_qq;
  c.loss.include_dd = spec.include_dd;
  c.encoder_normalize = spec.normalize;
  c.accumulation_steps = spec.accumulation_steps() + spec.idle_steps;
  if (spec.idle_steps > 0) c.accumulation_window = spec.accumulation_steps();
  c.accumulation_normalize = spec.accumulation_normalize;
  c.rng_mode = spec.per_rank_rng ? RngMode::per_rank : RngMode::synced;
  c.rng_seed = spec.rng_seed;
  c.scalar = spec.scalar;

  Rng rng(spec.data_seed);
  c.weight = normal_matrix(rng, spec.embedding_dim, spec.feature_dim);
  for (const auto& micro : spec.negatives) {
    auto& shards = c.batches.emplace_back();
    for (const auto& shard : micro) {
      shards.push_back(shard_batch(rng, shard, spec.feature_dim, spec.features));
    }
  }
  for (std::int32_t m = 0; m < spec.idle_steps; ++m) {  // outside the window: empty
    auto& shards = c.batches.emplace_back(static_cast<std::size_t>(spec.dp));
    for (auto& shard : shards) shard.features.resize(0, spec.feature_dim);
  }
  if (spec.record_draws && c.loss.hard_negatives) {
    c.padding_draws = arbitrary_padding_draws(c, spec.draw_seed);
  }
  return c;
}

std::string describe_mesh(const CaseSpec& spec) {
  return "W=" + std::to_string(spec.world) + " P=" + std::to_string(spec.dp) +
         " A=" + std::to_string(spec.accumulation_steps()) +
         (spec.accumulation_normalize ? "" : "(unnormalized)");
}

std::string describe(const CaseSpec& spec) {
  std::ostringstream out;
  out << describe_mesh(spec) << " negatives=[";
  for (std::size_t m = 0; m < spec.negatives.size(); ++m) {
    out << (m ? "," : "") << "[";
    for (std::size_t d = 0; d < spec.negatives[m].size(); ++d) {
      out << (d ? "," : "") << "[";
      for (std::size_t g = 0; g < spec.negatives[m][d].size(); ++g) {
        out << (g ? "," : "") << spec.negatives[m][d][g];
      }
      out << "]";
    }
    out << "]";
  }
  out << "] F=" << spec.feature_dim << " D=" << spec.embedding_dim
      << " normalize=" << spec.normalize << " use_batch=" << spec.use_batch
      << " H=" << spec.hard_negatives << " mask=" << spec.mask_fake_negative
      << " margin=" << spec.fake_neg_margin << " qq=" << spec.include_qq
      << " dd=" << spec.include_dd << " T=" << spec.temperature
      << " reduction=" << name_of(spec.reduction) << " gather=" << name_of(spec.gather)
      << " scalar=" << name_of(spec.scalar) << " data_seed=" << spec.data_seed
      << " rng_seed=" << spec.rng_seed << " compensate=" << spec.compensate
      << " per_rank_rng=" << spec.per_rank_rng << " idle_steps=" << spec.idle_steps
      << " record_draws=" << spec.record_draws << " draw_seed=" << spec.draw_seed
      << " features=" << name_of(spec.features) << " schedule_seed=" << spec.schedule_seed
      << " reduction_order_seed=" << spec.reduction_order_seed;
  return out.str();
}

}  // namespace infonce::properties
