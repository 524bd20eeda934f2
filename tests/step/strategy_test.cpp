// The predictions of step/strategy.hpp against a brute-force multi-rank
// computation written here from the definitions alone: for small random
// cases, every rank's loss is differentiated by Eigen's AutoDiff with one
// copy of the parameters per gathered slot, so the test itself decides where
// each slot's gradient goes (kept, dropped, or sent to the slot's owner by the
// reduce-scatter of an autograd gather). Then the backward scale, the DDP mean
// over W ranks (R identical replicas per shard) or the sum over the DP group,
// and the measured ratio per parameter group against the full-batch gradient.
// Three loss families: an in-batch InfoNCE with inverse temperature tau, the
// CLIP symmetric loss with its log logit scale, and SigLIP's sigmoid loss with
// its log scale (a fixed bias; every one written out here, not taken from
// loss/).
#include <gtest/gtest.h>

#include <Eigen/Core>  // before AutoDiff, which does not include it
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "base/rng.hpp"
#include "loss/matrix.hpp"
#include "step/strategy.hpp"

#include <unsupported/Eigen/AutoDiff>

namespace infonce::step {
namespace {

using AD = Eigen::AutoDiffScalar<Eigen::VectorXd>;
using Rows = std::vector<std::vector<AD>>;

enum class Family { infonce, clip, siglip };

const char* family_name(Family f) {
  return f == Family::infonce ? "infonce" : f == Family::clip ? "clip" : "siglip";
}

constexpr double kSigLipBias = -1.0;

// ---- a small random step ----

struct SimCase {
  Family family = Family::infonce;
  StepShape shape;
  std::vector<Eigen::Index> counts;      // queries per DP shard
  Matrix<double> weight_a, weight_b;     // infonce: weight_b unused (one tower)
  double direct = 0;                     // tau, or CLIP's log scale
  std::vector<Matrix<double>> x_a, x_b;  // per shard: n_d x F (query/doc, or image/text)
  Eigen::Index encoder_size() const {
    return weight_a.size() + (family != Family::infonce ? weight_b.size() : 0);
  }
  Eigen::Index parameters() const { return encoder_size() + 1; }
};

Matrix<double> random_matrix(Rng& rng, Eigen::Index rows, Eigen::Index cols) {
  Matrix<double> m(rows, cols);
  for (Eigen::Index i = 0; i < rows; ++i)
    for (Eigen::Index j = 0; j < cols; ++j) m(i, j) = rng.normal();
  return m;
}

SimCase random_sim_case(Family family, StepShape shape, std::uint64_t seed) {
  Rng rng(seed);
  SimCase c;
  c.family = family;
  c.shape = shape;
  const auto n = rng.between(2, 3);
  for (std::int32_t d = 0; d < shape.dp; ++d)
    c.counts.push_back(shape.equal_batches ? n : rng.between(1, 3));
  if (!shape.equal_batches) c.counts[0] = c.counts[1] + 1;  // never all equal
  const Eigen::Index dim = 2, features = 3;
  c.weight_a = 0.7 * random_matrix(rng, dim, features);
  c.weight_b = 0.7 * random_matrix(rng, dim, features);
  c.direct = family == Family::infonce ? 0.5 + 2.0 * rng.unit() : 1.5 * rng.unit();
  for (const Eigen::Index count : c.counts) {
    c.x_a.push_back(random_matrix(rng, count, features));
    c.x_b.push_back(random_matrix(rng, count, features));
  }
  return c;
}

// ---- the forward on AD rows ----

// Parameter copy `block` of the case: variables block * parameters + i.
struct Parameters {
  Rows weight_a, weight_b;
  AD direct;
};

Parameters parameter_block(const SimCase& c, Eigen::Index block, Eigen::Index total) {
  Eigen::Index index = block * c.parameters();
  auto rows_of = [&](const Matrix<double>& w) {
    Rows rows(static_cast<std::size_t>(w.rows()));
    for (Eigen::Index i = 0; i < w.rows(); ++i)
      for (Eigen::Index j = 0; j < w.cols(); ++j)
        rows[static_cast<std::size_t>(i)].emplace_back(w(i, j), total, index++);
    return rows;
  };
  Parameters p;
  p.weight_a = rows_of(c.weight_a);
  p.weight_b = c.family != Family::infonce ? rows_of(c.weight_b) : p.weight_a;
  p.direct = AD(c.direct, total, index++);
  return p;
}

Rows embed(const Rows& weight, const Matrix<double>& x) {
  Rows out;
  for (Eigen::Index n = 0; n < x.rows(); ++n) {
    std::vector<AD> row;
    for (const auto& w : weight) {
      AD y = AD(0.0);
      for (Eigen::Index f = 0; f < x.cols(); ++f) y += w[static_cast<std::size_t>(f)] * x(n, f);
      row.push_back(y);
    }
    out.push_back(row);
  }
  return out;
}

AD dot(const std::vector<AD>& a, const std::vector<AD>& b) {
  AD s = AD(0.0);
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

AD mean_cross_entropy(const Rows& queries, const Rows& docs, std::size_t offset, const AD& scale) {
  AD total = AD(0.0);
  for (std::size_t i = 0; i < queries.size(); ++i) {
    AD sum = AD(0.0);
    for (const auto& d : docs) sum += exp(scale * dot(queries[i], d));
    total += log(sum) - scale * dot(queries[i], docs[offset + i]);
  }
  return total / static_cast<double>(queries.size());
}

// A side's rows: (a, b) = (query, document) for InfoNCE, (image, text) for CLIP.
struct Side {
  Rows a, b;
  void append(const Side& other) {
    a.insert(a.end(), other.a.begin(), other.a.end());
    b.insert(b.end(), other.b.begin(), other.b.end());
  }
};

Side embed_shard(const SimCase& c, const Parameters& p, std::size_t shard) {
  return {embed(p.weight_a, c.x_a[shard]), embed(p.weight_b, c.x_b[shard])};
}

// SigLIP: the images against every text, -log sigmoid(y z) summed, over the images;
// z = exp(log) a . b + bias, y = +1 for text offset + i, else -1.
AD sigmoid_loss(const Rows& images, const Rows& texts, std::size_t offset, const AD& scale) {
  AD total = AD(0.0);
  for (std::size_t i = 0; i < images.size(); ++i) {
    for (std::size_t j = 0; j < texts.size(); ++j) {
      const double label = j == offset + i ? 1.0 : -1.0;
      total += log(1.0 + exp(-label * (scale * dot(images[i], texts[j]) + kSigLipBias)));
    }
  }
  return total / static_cast<double>(images.size());
}

// InfoNCE: tau q . d, target offset + i. CLIP: (i2t + t2i) / 2 with scale exp(log).
AD family_loss(Family family, const Side& queries, const Side& docs, std::size_t offset,
               const AD& direct) {
  if (family == Family::infonce) return mean_cross_entropy(queries.a, docs.b, offset, direct);
  if (family == Family::siglip) return sigmoid_loss(queries.a, docs.b, offset, exp(direct));
  const AD scale = exp(direct);
  return (mean_cross_entropy(queries.a, docs.b, offset, scale) +
          mean_cross_entropy(queries.b, docs.a, offset, scale)) /
         2.0;
}

Eigen::VectorXd gradient_of(const AD& loss, Eigen::Index total) {
  Eigen::VectorXd g = Eigen::VectorXd::Zero(total);
  if (loss.derivatives().size() == total) g = loss.derivatives();
  return g;
}

// ---- the brute-force step ----

// The full-batch gradient (one parameter copy).
Eigen::VectorXd reference_gradient(const SimCase& c, Reduction reduction) {
  const Eigen::Index total = c.parameters();
  const Parameters p = parameter_block(c, 0, total);
  const auto shards = static_cast<std::size_t>(c.shape.dp);
  if (!c.shape.use_batch) {
    AD objective = AD(0.0);
    for (std::size_t d = 0; d < shards; ++d) {
      const Side own = embed_shard(c, p, d);
      objective += family_loss(c.family, own, own, 0, p.direct);
    }
    if (reduction == Reduction::mean) objective /= static_cast<double>(shards);
    return gradient_of(objective, total);
  }
  Side all;
  for (std::size_t d = 0; d < shards; ++d) all.append(embed_shard(c, p, d));
  return gradient_of(family_loss(c.family, all, all, 0, p.direct), total);
}

// Every DP shard's gradient before the scale and the reduction: block 0 is
// the rank's own use (its live local rows and the direct parameter), block
// 1 + e the rows it holds in gathered slot e, routed by the gather.
std::vector<Eigen::VectorXd> shard_gradients(const SimCase& c, const Strategy& strategy) {
  const auto shards = static_cast<std::size_t>(c.shape.dp);
  const Eigen::Index n = c.parameters();
  const Eigen::Index total = (c.shape.dp + 1) * n;
  std::vector<Eigen::VectorXd> out(shards, Eigen::VectorXd::Zero(n));
  const bool gather = c.shape.use_batch && c.shape.dp > 1;
  for (std::size_t d = 0; d < shards; ++d) {
    const Parameters own = parameter_block(c, 0, total);
    const Side local = embed_shard(c, own, d);
    if (!gather) {
      out[d] += gradient_of(family_loss(c.family, local, local, 0, own.direct), total).head(n);
      continue;
    }
    Side gathered;
    std::size_t prefix = 0;
    for (std::size_t e = 0; e < shards; ++e) {
      gathered.append(
          embed_shard(c, parameter_block(c, 1 + static_cast<Eigen::Index>(e), total), e));
      if (e < d) prefix += static_cast<std::size_t>(c.counts[e]);
    }
    const AD loss = strategy.scope == LossScope::global
                        ? family_loss(c.family, gathered, gathered, 0, own.direct)
                        : family_loss(c.family, local, gathered, prefix, own.direct);
    const Eigen::VectorXd g = gradient_of(loss, total);
    out[d] += g.head(n);
    for (std::size_t e = 0; e < shards; ++e) {
      const Eigen::VectorXd slot = g.segment((1 + static_cast<Eigen::Index>(e)) * n, n);
      switch (strategy.gather) {
        case GatherKind::autograd:
          out[e] += slot;  // the reduce-scatter: slot e's gradient summed at its owner
          break;
        case GatherKind::detached_own_live:
          if (e == d) out[d] += slot;  // only the own slot is live
          break;
        case GatherKind::detached:
          break;  // every slot is a constant
      }
    }
  }
  return out;
}

// The step's gradient: s x each shard's, then the DDP reduction over the W
// world ranks (rank w holds shard w / R) or the sum over the DP group.
Eigen::VectorXd step_gradient(const SimCase& c, const Strategy& strategy) {
  const std::vector<Eigen::VectorXd> shards = shard_gradients(c, strategy);
  const double s = strategy.scale == BackwardScale::none        ? 1.0
                   : strategy.scale == BackwardScale::dp_shards ? c.shape.dp
                                                                : c.shape.world;
  Eigen::VectorXd out = Eigen::VectorXd::Zero(c.parameters());
  if (strategy.reduction == Reduction::sum) {
    for (const auto& g : shards) out += s * g;
    return out;
  }
  const std::int32_t replicas = c.shape.world / c.shape.dp;
  for (std::int32_t w = 0; w < c.shape.world; ++w)
    out += s * shards[static_cast<std::size_t>(w / replicas)];
  return out / static_cast<double>(c.shape.world);
}

// ---- measuring a ratio ----

struct Measured {
  bool degenerate = false;  // the reference is ~0: no ratio to measure
  double ratio = 0;         // least squares: <f, r> / <r, r>
  double residual = 0;      // |f - ratio r| / |r|
};

Measured measure(const Eigen::VectorXd& step, const Eigen::VectorXd& reference) {
  Measured m;
  const double norm = reference.norm();
  if (norm < 1e-9) {
    m.degenerate = true;
    return m;
  }
  m.ratio = step.dot(reference) / reference.squaredNorm();
  m.residual = (step - m.ratio * reference).norm() / norm;
  return m;
}

// ---- the test ----

struct Observations {
  double min_ratio = INFINITY, max_ratio = -INFINITY, max_residual = 0;
  int count = 0;
  void add(const Measured& m) {
    min_ratio = std::min(min_ratio, m.ratio);
    max_ratio = std::max(max_ratio, m.ratio);
    max_residual = std::max(max_residual, m.residual);
    ++count;
  }
  // No constant explains every observation.
  bool no_single_ratio() const {
    return max_residual > 1e-6 ||
           max_ratio - min_ratio > 1e-6 * std::max(1.0, std::fabs(max_ratio));
  }
};

std::vector<StepShape> shapes() {
  std::vector<StepShape> out;
  for (const auto& [dp, world] :
       std::vector<std::pair<int, int>>{{1, 1}, {1, 2}, {2, 2}, {2, 4}, {3, 3}, {3, 6}}) {
    for (const bool equal : {true, false}) {
      if (dp == 1 && !equal) continue;
      for (const bool use_batch : {true, false}) out.push_back({dp, world, equal, use_batch});
    }
  }
  return out;
}

std::string shape_name(const StepShape& s) {
  return "P" + std::to_string(s.dp) + " W" + std::to_string(s.world) +
         (s.equal_batches ? " equal" : " unequal") + (s.use_batch ? "" : " no-batch");
}

TEST(StrategyPredictions, MatchABruteForceMultiRankComputationForEveryPoint) {
  constexpr int kCasesPerCell = 5;
  std::map<std::string, Observations> no_ratio_cells;
  int single_checks = 0, degenerate = 0;
  double worst_ratio_error = 0, worst_residual = 0;
  std::uint64_t seed = 1;
  for (const Family family : {Family::infonce, Family::clip, Family::siglip}) {
    for (const StepShape& shape : shapes()) {
      for (const Strategy& strategy :
           dp_strategies()) {  // the brute force gathers over the DP group
        for (int k = 0; k < kCasesPerCell; ++k) {
          const SimCase c = random_sim_case(family, shape, seed++);
          const Eigen::VectorXd ref = reference_gradient(c, strategy.reduction);
          const Eigen::VectorXd step = step_gradient(c, strategy);
          const Eigen::Index encoders = c.encoder_size();
          for (const ParameterGroup group : {ParameterGroup::encoders, ParameterGroup::direct}) {
            const bool enc = group == ParameterGroup::encoders;
            const Measured m = enc ? measure(step.head(encoders), ref.head(encoders))
                                   : measure(step.tail(1), ref.tail(1));
            if (m.degenerate) {
              ++degenerate;
              continue;
            }
            const Prediction p = predict(strategy, group, shape);
            const std::string cell = std::string(family_name(family)) + " " + shape_name(shape) +
                                     " " + name_of(strategy) + " " + std::string(name_of(group));
            if (p.verdict == Verdict::no_single_ratio) {
              no_ratio_cells[cell].add(m);
              continue;
            }
            ++single_checks;
            const double error = std::fabs(m.ratio - p.ratio) / std::max(1.0, std::fabs(p.ratio));
            worst_ratio_error = std::max(worst_ratio_error, error);
            worst_residual = std::max(worst_residual, m.residual);
            EXPECT_LE(error, 1e-10) << cell << " seed " << seed - 1 << ": measured " << m.ratio
                                    << ", predicted " << describe(p);
            EXPECT_LE(m.residual, 1e-10) << cell << " seed " << seed - 1
                                         << ": not a single ratio, predicted " << describe(p);
          }
        }
      }
    }
  }
  int no_ratio_ok = 0;
  for (const auto& [cell, obs] : no_ratio_cells) {
    EXPECT_TRUE(obs.no_single_ratio())
        << cell << ": predicted no single ratio, but " << obs.count << " cases all gave "
        << obs.min_ratio << " (residual " << obs.max_residual << ")";
    no_ratio_ok += obs.no_single_ratio() ? 1 : 0;
  }
  std::printf(
      "strategy predictions: %d single-ratio checks (worst ratio error %.2e, residual %.2e), "
      "%d/%zu no-single-ratio cells confirmed, %d degenerate (zero reference) skipped\n",
      single_checks, worst_ratio_error, worst_residual, no_ratio_ok, no_ratio_cells.size(),
      degenerate);
  EXPECT_GT(single_checks, 2000);
}

// The table of strategy.hpp, read directly (P = 4, W = 8, equal batches).
TEST(StrategyPredictions, NamedPoints) {
  const StepShape shape{.dp = 4, .world = 8, .equal_batches = true, .use_batch = true};
  auto at = [&](Strategy s, ParameterGroup g) { return predict(s, g, shape); };
  EXPECT_EQ(at(kSeedFixed, ParameterGroup::encoders).verdict, Verdict::correct);
  EXPECT_EQ(at(kSeedFixed, ParameterGroup::direct).ratio,
            4.0);  // the blanket scale over-counts 1/T
  EXPECT_EQ(at(kSeedBeforeFix, ParameterGroup::encoders).ratio, 0.25);
  EXPECT_EQ(at(kSeedBeforeFix, ParameterGroup::direct).verdict, Verdict::correct);
  const Strategy open_clip_both{GatherKind::autograd, LossScope::local, BackwardScale::none,
                                Reduction::mean};
  EXPECT_EQ(at(open_clip_both, ParameterGroup::encoders).verdict, Verdict::correct);
  EXPECT_TRUE(at(open_clip_both, ParameterGroup::encoders).depends_on_equal_batches);
  const Strategy open_clip_local{GatherKind::detached, LossScope::local, BackwardScale::none,
                                 Reduction::mean};
  EXPECT_EQ(at(open_clip_local, ParameterGroup::encoders).cause, NoRatioCause::dropped_terms);
  const Strategy world_scaled{GatherKind::detached_own_live, LossScope::global,
                              BackwardScale::world_size, Reduction::mean};
  EXPECT_EQ(at(world_scaled, ParameterGroup::encoders).ratio, 2.0);  // W / P
  const StepShape unequal{.dp = 4, .world = 4, .equal_batches = false, .use_batch = true};
  EXPECT_EQ(predict(open_clip_both, ParameterGroup::direct, unequal).cause,
            NoRatioCause::unequal_batches);
  EXPECT_EQ(describe(predict(open_clip_both, ParameterGroup::encoders, unequal)),
            "no single ratio (unequal batches)");
  EXPECT_EQ(describe(at(open_clip_both, ParameterGroup::direct)), "correct [equal batches]");
  EXPECT_EQ(name_of(kSeedFixed), "detached-own-live/global/scale-P/mean");
  EXPECT_EQ(describe(at(open_clip_local, ParameterGroup::encoders)),
            "no single ratio (dropped terms)");
}

}  // namespace
}  // namespace infonce::step
