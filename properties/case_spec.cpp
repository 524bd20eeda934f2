#include "properties/case_spec.hpp"

#include <sstream>

#include "base/rng.hpp"

namespace infonce::properties {
namespace {

Matrix<double> normal_matrix(Rng& rng, std::int64_t rows, std::int64_t cols) {
  Matrix<double> m(rows, cols);
  for (std::int64_t i = 0; i < m.size(); ++i) m.data()[i] = rng.normal();
  return m;
}

loss::ShardBatch shard_batch(Rng& rng, const std::vector<std::int32_t>& negatives,
                             std::int32_t feature_dim) {
  loss::ShardBatch batch;
  batch.negative_counts = negatives;
  std::int64_t rows = 0;
  for (std::int32_t k : negatives) rows += k + 2;
  batch.features = normal_matrix(rng, rows, feature_dim);
  return batch;
}

const char* name_of(Reduction r) { return r == Reduction::mean ? "mean" : "sum"; }
const char* name_of(GatherPath g) { return g == GatherPath::object ? "object" : "tensor"; }
const char* name_of(ScalarType s) { return s == ScalarType::float64 ? "f64" : "f32"; }

}  // namespace

Case build_case(const CaseSpec& spec) {
  Case c;
  c.mesh = {spec.world, spec.dp};
  c.reduction = spec.reduction;
  c.gather = spec.gather;
  c.compensate = true;
  c.loss.temperature = spec.temperature;
  c.loss.use_batch = spec.use_batch;
  if (spec.hard_negatives > 0) c.loss.hard_negatives = spec.hard_negatives;
  c.loss.padding = loss::Padding::fixed;
  c.loss.mask_fake_negative = spec.mask_fake_negative;
  c.loss.fake_neg_margin = spec.fake_neg_margin;
  c.loss.include_qq = spec.include_qq;
  c.loss.include_dd = spec.include_dd;
  c.encoder_normalize = spec.normalize;
  c.accumulation_steps = spec.accumulation_steps();
  c.accumulation_normalize = spec.accumulation_normalize;
  c.rng_mode = RngMode::synced;
  c.rng_seed = spec.rng_seed;
  c.scalar = spec.scalar;

  Rng rng(spec.data_seed);
  c.weight = normal_matrix(rng, spec.embedding_dim, spec.feature_dim);
  for (const auto& micro : spec.negatives) {
    auto& shards = c.batches.emplace_back();
    for (const auto& shard : micro) shards.push_back(shard_batch(rng, shard, spec.feature_dim));
  }
  return c;
}

std::string describe(const CaseSpec& spec) {
  std::ostringstream out;
  out << "W=" << spec.world << " P=" << spec.dp << " A=" << spec.accumulation_steps()
      << (spec.accumulation_normalize ? "" : "(unnormalized)") << " negatives=[";
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
      << " rng_seed=" << spec.rng_seed;
  return out.str();
}

}  // namespace infonce::properties
