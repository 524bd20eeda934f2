// The CLIP loss family (loss/clip.hpp): the analytic backward against Eigen's
// AutoDiff of an independently written forward (naive loops, written from the
// formula in clip.hpp's header, not from clip.cpp), against central finite
// differences of the forward in long double, and on hand-computed cases.
#include <gtest/gtest.h>

#include <Eigen/Core>  // before AutoDiff, which does not include it
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "loss/clip.hpp"
#include "support.hpp"

#include <unsupported/Eigen/AutoDiff>

namespace infonce::loss::testing {
namespace {

using AD = Eigen::AutoDiffScalar<Eigen::VectorXd>;
using ADRows = std::vector<std::vector<AD>>;

// ---- the independent forward ----

// Every entry of every block becomes one active variable, blocks in order.
struct Variables {
  Eigen::Index count = 0;
  ADRows add(const Matrix<double>& m, Eigen::Index total) {
    ADRows rows(static_cast<std::size_t>(m.rows()));
    for (Eigen::Index i = 0; i < m.rows(); ++i) {
      for (Eigen::Index j = 0; j < m.cols(); ++j)
        rows[static_cast<std::size_t>(i)].emplace_back(m(i, j), total, count++);
    }
    return rows;
  }
  AD add_scalar(double value, Eigen::Index total) { return AD(value, total, count++); }
};

// e = W x, then e / ||e|| (every test vector is far from 0).
ADRows tower(const ADRows& weight, const Matrix<double>& features, bool normalize) {
  ADRows e;
  for (Eigen::Index n = 0; n < features.rows(); ++n) {
    std::vector<AD> row;
    for (const auto& w : weight) {
      AD y = AD(0.0);
      for (Eigen::Index f = 0; f < features.cols(); ++f)
        y += w[static_cast<std::size_t>(f)] * features(n, f);
      row.push_back(y);
    }
    if (normalize) {
      AD squared = AD(0.0);
      for (const AD& y : row) squared += y * y;
      const AD norm = sqrt(squared);
      for (AD& y : row) y = y / norm;
    }
    e.push_back(row);
  }
  return e;
}

AD dot(const std::vector<AD>& a, const std::vector<AD>& b) {
  AD s = AD(0.0);
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// mean over query rows i of -log softmax(z_i)[offset + i], z_ij = scale q_i.d_j + bias.
AD mean_cross_entropy(const ADRows& queries, const ADRows& docs, std::size_t offset,
                      const AD& scale, const AD& bias) {
  AD total = AD(0.0);
  for (std::size_t i = 0; i < queries.size(); ++i) {
    AD sum = AD(0.0);
    for (const auto& d : docs) sum += exp(scale * dot(queries[i], d) + bias);
    total += log(sum) - (scale * dot(queries[i], docs[offset + i]) + bias);
  }
  return total / static_cast<double>(queries.size());
}

AD independent_clip(const ADRows& iq, const ADRows& tq, const ADRows& id, const ADRows& td,
                    std::size_t offset, const AD& log_scale, const AD& bias) {
  const AD scale = exp(log_scale);
  return (mean_cross_entropy(iq, td, offset, scale, bias) +
          mean_cross_entropy(tq, id, offset, scale, bias)) /
         2.0;
}

Matrix<double> block_of(const AD& loss, Eigen::Index first, Eigen::Index rows, Eigen::Index cols) {
  Matrix<double> out = Matrix<double>::Zero(rows, cols);
  for (Eigen::Index k = 0; k < rows * cols; ++k) {
    if (first + k < loss.derivatives().size())
      out(k / cols, k % cols) = loss.derivatives()(first + k);
  }
  return out;
}

double derivative_of(const AD& loss, Eigen::Index index) {
  return index < loss.derivatives().size() ? loss.derivatives()(index) : 0.0;
}

// max |a - b| / max(max |b|, floor).
double error_against(const Matrix<double>& analytic, const Matrix<double>& exact,
                     double floor = 1e-3) {
  return (analytic - exact).cwiseAbs().maxCoeff() / std::max(exact.cwiseAbs().maxCoeff(), floor);
}

double scalar_error(double analytic, double exact, double floor = 1e-3) {
  return std::fabs(analytic - exact) / std::max(std::fabs(exact), floor);
}

// ---- random problems ----

struct Problem {
  ClipTowers towers;
  Matrix<double> image_features, text_features;
  ClipLogitParameters parameters;
};

Problem random_problem(std::uint64_t seed, bool normalize_image, bool normalize_text, bool bias) {
  Rng rng(seed);
  Problem p;
  const auto n = rng.between(1, 5);
  const auto dim = rng.between(2, 4);
  const auto fi = rng.between(2, 4);
  const auto ft = rng.between(2, 4);
  p.towers.image_weight = random_matrix(rng, dim, fi, 0.7);
  p.towers.text_weight = random_matrix(rng, dim, ft, 0.7);
  p.towers.image_normalize = normalize_image;
  p.towers.text_normalize = normalize_text;
  p.image_features = random_matrix(rng, n, fi, 1.0);
  p.text_features = random_matrix(rng, n, ft, 1.0);
  // exp(log_scale) in [1, 20]: from a flat softmax to CLIP's sharp range.
  p.parameters.log_scale = 3.0 * rng.unit();
  if (bias) p.parameters.bias = 4.0 * rng.unit() - 2.0;
  return p;
}

struct Flags {
  bool normalize_image, normalize_text, bias;
  std::string name() const {
    return std::string(normalize_image ? "I-norm" : "I-raw") +
           (normalize_text ? "+T-norm" : "+T-raw") + (bias ? "+bias" : "");
  }
};

std::vector<Flags> all_flags() {
  std::vector<Flags> out;
  for (int bits = 0; bits < 8; ++bits)
    out.push_back({(bits & 1) != 0, (bits & 2) != 0, (bits & 4) != 0});
  return out;
}

// ---- AutoDiff: full batch through both towers ----

TEST(ClipAutoDiff, FullBatchGradientOfBothTowersAndTheScale) {
  double worst_loss = 0, worst_image = 0, worst_text = 0, worst_scale = 0, worst_bias = 0;
  int checks = 0;
  for (const Flags& flags : all_flags()) {
    for (std::uint64_t seed = 0; seed < 25; ++seed) {
      const Problem p =
          random_problem(1000 + seed, flags.normalize_image, flags.normalize_text, flags.bias);
      const Eigen::Index total = p.towers.image_weight.size() + p.towers.text_weight.size() + 2;
      Variables v;
      const ADRows wi = v.add(p.towers.image_weight, total);
      const ADRows wt = v.add(p.towers.text_weight, total);
      const AD log_scale = v.add_scalar(p.parameters.log_scale, total);
      const AD bias = v.add_scalar(p.parameters.bias.value_or(0.0), total);
      const ADRows image = tower(wi, p.image_features, flags.normalize_image);
      const ADRows text = tower(wt, p.text_features, flags.normalize_text);
      const AD loss = independent_clip(image, text, image, text, 0, log_scale, bias);

      const auto analytic =
          clip_full_batch<double>(p.towers, p.image_features, p.text_features, p.parameters);
      const Eigen::Index di = p.towers.image_weight.size();
      const Eigen::Index dt = p.towers.text_weight.size();
      // Against max(max |exact|, the logit scale): a gradient that cancels
      // (one pair: exactly 0) is known to rounding of its terms, which are
      // up to scale * |e| * |x| ~ scale.
      const double floor = std::exp(p.parameters.log_scale);
      worst_loss = std::max(worst_loss, scalar_relative_error(analytic.loss, loss.value()));
      worst_image =
          std::max(worst_image, error_against(analytic.grad_image_weight,
                                              block_of(loss, 0, p.towers.image_weight.rows(),
                                                       p.towers.image_weight.cols()),
                                              floor));
      worst_text = std::max(
          worst_text,
          error_against(
              analytic.grad_text_weight,
              block_of(loss, di, p.towers.text_weight.rows(), p.towers.text_weight.cols()), floor));
      worst_scale = std::max(
          worst_scale, scalar_error(analytic.grad_log_scale, derivative_of(loss, di + dt), floor));
      // The exact dL/dbias is 0: both sides must be rounding noise.
      worst_bias = std::max(
          {worst_bias, std::fabs(analytic.grad_bias), std::fabs(derivative_of(loss, di + dt + 1))});
      ++checks;
    }
  }
  std::printf(
      "CLIP AutoDiff, %d full-batch checks: loss %.2e, dL/dW_image %.2e, dL/dW_text %.2e, "
      "dL/dlog_scale %.2e, |dL/dbias| %.2e\n",
      checks, worst_loss, worst_image, worst_text, worst_scale, worst_bias);
  EXPECT_LE(worst_loss, 1e-14);
  EXPECT_LE(worst_image, 1e-12);
  EXPECT_LE(worst_text, 1e-12);
  EXPECT_LE(worst_scale, 1e-12);
  EXPECT_LE(worst_bias, 1e-14);
}

// ---- AutoDiff: the rows form, local loss (queries a slice, targets offset) ----

TEST(ClipAutoDiff, LocalLossRowsGradientWithOffsetTargets) {
  double worst = 0;
  int checks = 0;
  for (std::uint64_t seed = 0; seed < 200; ++seed) {
    Rng rng(5000 + seed);
    const auto docs = rng.between(1, 6);
    const auto queries = rng.between(1, docs);
    const auto offset = rng.between(0, docs - queries);
    const auto dim = rng.between(1, 4);
    const Matrix<double> id = random_matrix(rng, docs, dim, 0.8);
    const Matrix<double> td = random_matrix(rng, docs, dim, 0.8);
    // Queries: the documents' own rows (as under a gather), or other values.
    const bool own = rng.below(2) == 0;
    const Matrix<double> iq = own ? Matrix<double>(id.middleRows(offset, queries))
                                  : random_matrix(rng, queries, dim, 0.8);
    const Matrix<double> tq = own ? Matrix<double>(td.middleRows(offset, queries))
                                  : random_matrix(rng, queries, dim, 0.8);
    ClipLogitParameters parameters{.log_scale = 2.5 * rng.unit() - 0.5, .bias = 1.5};

    const Eigen::Index total = 2 * (iq.size() + id.size()) + 2;
    Variables v;
    const ADRows a_iq = v.add(iq, total), a_tq = v.add(tq, total);
    const ADRows a_id = v.add(id, total), a_td = v.add(td, total);
    const AD log_scale = v.add_scalar(parameters.log_scale, total);
    const AD bias = v.add_scalar(*parameters.bias, total);
    const AD loss =
        independent_clip(a_iq, a_tq, a_id, a_td, static_cast<std::size_t>(offset), log_scale, bias);
    const auto analytic = clip_loss_and_gradient<double>({iq, tq, id, td, offset}, parameters);
    Eigen::Index at = 0;
    auto next = [&](const Matrix<double>& m) {
      const Matrix<double> b = block_of(loss, at, m.rows(), m.cols());
      at += m.size();
      return b;
    };
    const Matrix<double> g_iq = next(iq), g_tq = next(tq), g_id = next(id), g_td = next(td);
    worst = std::max({worst, scalar_relative_error(analytic.loss, loss.value()),
                      error_against(analytic.grad_image_queries, g_iq),
                      error_against(analytic.grad_text_queries, g_tq),
                      error_against(analytic.grad_image_docs, g_id),
                      error_against(analytic.grad_text_docs, g_td),
                      scalar_error(analytic.grad_log_scale, derivative_of(loss, at))});
    EXPECT_LE(std::fabs(analytic.grad_bias), 1e-15) << "seed " << seed;
    ++checks;
  }
  std::printf("CLIP AutoDiff, %d local-loss checks: max rel err %.2e\n", checks, worst);
  EXPECT_LE(worst, 1e-12);
}

// ---- finite differences in long double ----

// Fourth-order central stencil of f at x along one coordinate.
long double central(const std::function<long double(long double)>& f, long double x,
                    long double h) {
  return (8 * (f(x + h) - f(x - h)) - (f(x + 2 * h) - f(x - 2 * h))) / (12 * h);
}

TEST(ClipFiniteDifferences, EveryParameterInLongDouble) {
  double worst = 0;
  std::string where;
  int entries = 0;
  for (const Flags& flags : all_flags()) {
    for (std::uint64_t seed = 0; seed < 10; ++seed) {
      Problem p =
          random_problem(9000 + seed, flags.normalize_image, flags.normalize_text, flags.bias);
      const auto analytic =
          clip_full_batch<long double>(p.towers, p.image_features, p.text_features, p.parameters);
      auto loss_at = [&](const Problem& q) {
        return clip_full_batch<long double>(q.towers, q.image_features, q.text_features,
                                            q.parameters)
            .loss;
      };
      auto check = [&](long double fd, long double exact, const std::string& name) {
        const double error =
            static_cast<double>(std::fabs(fd - exact) / std::max(std::fabs(exact), 1e-3L));
        if (error > worst) {
          worst = error;
          where = flags.name() + " seed " + std::to_string(seed) + " " + name;
        }
        ++entries;
      };
      // Weights: perturb in double (the towers are stored in double), step 1e-4.
      for (Matrix<double>* w : {&p.towers.image_weight, &p.towers.text_weight}) {
        const bool image = w == &p.towers.image_weight;
        for (Eigen::Index k = 0; k < w->size(); ++k) {
          const double original = w->data()[k];
          const long double fd = central(
              [&](long double x) {
                w->data()[k] = static_cast<double>(x);
                return loss_at(p);
              },
              original, 1.0L / 8192);  // a power of two: x +- h exact in double
          w->data()[k] = original;
          const long double exact =
              image ? analytic.grad_image_weight.data()[k] : analytic.grad_text_weight.data()[k];
          check(fd, exact, (image ? "W_image " : "W_text ") + std::to_string(k));
        }
      }
      const double log_scale = p.parameters.log_scale;
      check(central(
                [&](long double x) {
                  p.parameters.log_scale = static_cast<double>(x);
                  return loss_at(p);
                },
                log_scale, 1.0L / 8192),
            analytic.grad_log_scale, "log_scale");
      p.parameters.log_scale = log_scale;
    }
  }
  std::printf("CLIP finite differences, %d entries: max rel err %.2e (%s)\n", entries, worst,
              where.c_str());
  EXPECT_LE(worst, 1e-9) << where;
}

// ---- hand cases ----

TEST(ClipHandCases, OnePairHasZeroLossAndZeroGradient) {
  const Matrix<double> image{{0.3, -1.2}};
  const Matrix<double> text{{2.0, 0.5}};
  const auto g =
      clip_global_loss_and_gradient<double>(image, text, {.log_scale = 1.7, .bias = 0.4});
  EXPECT_EQ(g.loss, 0.0);  // one logit per row: log softmax = 0 exactly
  EXPECT_EQ(g.grad_image.cwiseAbs().maxCoeff(), 0.0);
  EXPECT_EQ(g.grad_text.cwiseAbs().maxCoeff(), 0.0);
  EXPECT_EQ(g.grad_log_scale, 0.0);
  EXPECT_EQ(g.grad_bias, 0.0);
}

// I = T = the 2 x 2 identity, scale s: every row's logits are (s, 0) with the
// target first. L = log(1 + e^-s); with sigma = 1 / (1 + e^s),
// dL/dlog_scale = -s sigma, and image row 0 gets s sigma / 4 (-1, 1) as a query
// and the same again as a document: s sigma / 2 (-1, 1).
TEST(ClipHandCases, TwoOrthogonalPairs) {
  const double log_scale = std::log(3.0);
  const double s = 3.0;
  const double sigma = 1.0 / (1.0 + std::exp(s));
  const Matrix<double> eye = Matrix<double>::Identity(2, 2);
  const auto g =
      clip_global_loss_and_gradient<double>(eye, eye, {.log_scale = log_scale, .bias = {}});
  EXPECT_NEAR(g.loss, std::log1p(std::exp(-s)), 1e-15);
  EXPECT_NEAR(g.grad_log_scale, -s * sigma, 1e-15);
  const Matrix<double> row0{{-s * sigma / 2, s * sigma / 2}};
  const Matrix<double> row1{{s * sigma / 2, -s * sigma / 2}};
  EXPECT_NEAR((g.grad_image.row(0) - row0).cwiseAbs().maxCoeff(), 0.0, 1e-15);
  EXPECT_NEAR((g.grad_image.row(1) - row1).cwiseAbs().maxCoeff(), 0.0, 1e-15);
  EXPECT_NEAR((g.grad_text - g.grad_image).cwiseAbs().maxCoeff(), 0.0, 1e-15);
}

// A constant added to every logit of a row leaves a softmax cross-entropy unchanged.
TEST(ClipHandCases, TheBiasChangesNeitherLossNorGradient) {
  Rng rng(3);
  const Matrix<double> image = random_matrix(rng, 4, 3, 1.0);
  const Matrix<double> text = random_matrix(rng, 4, 3, 1.0);
  const auto without =
      clip_global_loss_and_gradient<double>(image, text, {.log_scale = 2.0, .bias = {}});
  const auto with =
      clip_global_loss_and_gradient<double>(image, text, {.log_scale = 2.0, .bias = -7.5});
  EXPECT_NEAR(with.loss, without.loss, 1e-14);
  EXPECT_LE((with.grad_image - without.grad_image).cwiseAbs().maxCoeff(), 1e-15);
  EXPECT_NEAR(with.grad_log_scale, without.grad_log_scale, 1e-15);
  EXPECT_LE(std::fabs(with.grad_bias), 1e-16);
  EXPECT_GT(with.grad_bias_magnitude, 0.5);  // its terms are there; they cancel
}

// P equal slices: the mean of the local losses (own queries, every document,
// targets offset by the slice's prefix) is the global loss, and the summed
// gradients (query and document roles) are P times the global gradient.
TEST(ClipHandCases, LocalLossesOfEqualSlicesAddUpToTheGlobalLoss) {
  Rng rng(11);
  const Eigen::Index slices = 3, per_slice = 2;
  const Matrix<double> image = random_matrix(rng, slices * per_slice, 3, 1.0);
  const Matrix<double> text = random_matrix(rng, slices * per_slice, 3, 1.0);
  const ClipLogitParameters parameters{.log_scale = 1.2, .bias = {}};
  const auto global = clip_global_loss_and_gradient<double>(image, text, parameters);
  double loss_sum = 0, scale_sum = 0;
  Matrix<double> image_sum = Matrix<double>::Zero(image.rows(), image.cols());
  for (Eigen::Index d = 0; d < slices; ++d) {
    const Matrix<double> iq = image.middleRows(d * per_slice, per_slice);
    const Matrix<double> tq = text.middleRows(d * per_slice, per_slice);
    const auto local =
        clip_loss_and_gradient<double>({iq, tq, image, text, d * per_slice}, parameters);
    loss_sum += local.loss;
    scale_sum += local.grad_log_scale;
    image_sum += local.grad_image_docs;
    image_sum.middleRows(d * per_slice, per_slice) += local.grad_image_queries;
  }
  EXPECT_NEAR(loss_sum / slices, global.loss, 1e-14);
  EXPECT_NEAR(scale_sum, slices * global.grad_log_scale, 1e-14);
  EXPECT_LE((image_sum - slices * global.grad_image).cwiseAbs().maxCoeff(), 1e-14);
}

TEST(ClipHandCases, FloatAndLongDoubleAgreeWithDouble) {
  const Problem p = random_problem(42, true, true, true);
  const auto d = clip_full_batch<double>(p.towers, p.image_features, p.text_features, p.parameters);
  const auto f = clip_full_batch<float>(p.towers, p.image_features, p.text_features, p.parameters);
  const auto l =
      clip_full_batch<long double>(p.towers, p.image_features, p.text_features, p.parameters);
  EXPECT_NEAR(f.loss, d.loss, 1e-5);
  EXPECT_LE(relative_error(f.grad_image_weight, d.grad_image_weight), 1e-4);
  EXPECT_NEAR(static_cast<double>(l.loss), d.loss, 1e-14);
  EXPECT_LE(relative_error(l.grad_text_weight, d.grad_text_weight), 1e-13);
}

// ---- bad input: one clear message each ----

void expect_input_error(const std::function<void()>& call, const std::string& fragment) {
  try {
    call();
    ADD_FAILURE() << "no InputError; expected one naming: " << fragment;
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(ClipBadInput, EachProblemIsNamed) {
  const Matrix<double> one = Matrix<double>::Ones(1, 3), empty(0, 3);
  const Matrix<double> narrow = Matrix<double>::Ones(2, 2);
  Matrix<double> a = Matrix<double>::Ones(2, 3), b = Matrix<double>::Ones(2, 3);
  expect_input_error([&] { clip_global_loss_and_gradient<double>(empty, empty, {}); },
                     "at least one pair");
  expect_input_error([&] { clip_global_loss_and_gradient<double>(a, narrow, {}); }, "text queries");
  expect_input_error(
      [&] {
        clip_loss_and_gradient<double>({a, b, a, b, 1}, {});
      },
      "outside the 2 documents");
  expect_input_error(
      [&] { clip_global_loss_and_gradient<double>(a, b, {.log_scale = NAN, .bias = {}}); },
      "logit_scale");
  expect_input_error(
      [&] { clip_global_loss_and_gradient<double>(a, b, {.log_scale = 800, .bias = {}}); },
      "overflow");
  expect_input_error(
      [&] { clip_global_loss_and_gradient<double>(a, b, {.log_scale = 0, .bias = INFINITY}); },
      "logit_bias");
  b(1, 1) = NAN;
  expect_input_error([&] { clip_global_loss_and_gradient<double>(a, b, {}); }, "finite");
  ClipTowers towers{Matrix<double>::Ones(2, 3), true, Matrix<double>::Ones(3, 3), true};
  expect_input_error([&] { clip_full_batch<double>(towers, a, a, {}); }, "dimensions");
  towers.text_weight = Matrix<double>::Ones(2, 3);
  expect_input_error([&] { clip_full_batch<double>(towers, a, one, {}); }, "text rows");
}

}  // namespace
}  // namespace infonce::loss::testing
