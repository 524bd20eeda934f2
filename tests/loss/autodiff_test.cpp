// (b) The analytic backward against forward-mode automatic differentiation
// (Eigen's AutoDiffScalar<VectorXd>) of the independent forward of
// support.hpp, for every mode and both code paths, with respect to the
// embeddings and, through an independently written encoder, the weight.
#include <gtest/gtest.h>

#include <Eigen/Core>  // before AutoDiff, which does not include it
#include <cstdio>

#include "support.hpp"

#include <unsupported/Eigen/AutoDiff>

namespace infonce::loss::testing {
namespace {

using AD = Eigen::AutoDiffScalar<Eigen::VectorXd>;

// Mask decisions must not depend on summation order.
constexpr double kMinGap = 1e-6;

// Each entry of `values` becomes an active variable (row-major index).
std::vector<std::vector<AD>> active_rows(const Matrix<double>& values) {
  const Eigen::Index count = values.size();
  std::vector<std::vector<AD>> rows(static_cast<std::size_t>(values.rows()));
  for (Eigen::Index i = 0; i < values.rows(); ++i) {
    for (Eigen::Index j = 0; j < values.cols(); ++j) {
      rows[static_cast<std::size_t>(i)].emplace_back(values(i, j), count, i * values.cols() + j);
    }
  }
  return rows;
}

Matrix<double> derivatives_as(const AD& loss, Eigen::Index rows, Eigen::Index cols) {
  Matrix<double> grad = Matrix<double>::Zero(rows, cols);
  // A loss with no dependence (size-0 derivatives) has a zero gradient.
  for (Eigen::Index k = 0; k < loss.derivatives().size(); ++k)
    grad(k / cols, k % cols) = loss.derivatives()(k);
  return grad;
}

// e = W x, then e / max(||e||, 1e-12): the encoder written out by hand.
std::vector<std::vector<AD>> independent_encode(const std::vector<std::vector<AD>>& weight,
                                                const Matrix<double>& features, bool normalize) {
  std::vector<std::vector<AD>> e;
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
      for (AD& y : row) y = norm.value() >= 1e-12 ? AD(y / norm) : AD(y / 1e-12);
    }
    e.push_back(row);
  }
  return e;
}

RandomCase separated_case(const Mode& mode, std::uint64_t& seed, bool equal_sizes) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    RandomCase c = random_case(mode, seed++, equal_sizes);
    const Matrix<double> e = encode(c.weight, c.features, c.normalize);
    if (mask_report(e, c.layout, c.settings).min_gap >= kMinGap) return c;
  }
  ADD_FAILURE() << "no separated case for " << mode.name();
  return random_case(mode, seed, equal_sizes);
}

struct Worst {
  double error = 0;
  std::string where;
  void add(double e, const std::string& w) {
    if (e > error) {
      error = e;
      where = w;
    }
  }
};

// max |a - b| / max(max |b|, floor): a floor for gradients that cancel to ~0.
double error_against(const Matrix<double>& analytic, const Matrix<double>& exact, double floor) {
  return (analytic - exact).cwiseAbs().maxCoeff() / std::max(exact.cwiseAbs().maxCoeff(), floor);
}

TEST(AutoDiff, AnalyticBackwardMatchesEveryModeAndPath) {
  Worst embeddings_worst, weight_worst, loss_worst;
  std::int64_t checks = 0;
  std::uint64_t seed = 20000;
  for (const Mode& mode : all_modes()) {
    for (const bool equal_sizes : {true, false}) {
      const RandomCase c = separated_case(mode, seed, equal_sizes);
      const auto groups = groups_of(c.layout);
      const Matrix<double> e = encode(c.weight, c.features, c.normalize);
      const AD loss_e = independent_loss(active_rows(e), groups, c.settings);
      const AD loss_w = independent_loss(
          independent_encode(active_rows(c.weight), c.features, c.normalize), groups, c.settings);
      const Matrix<double> exact_e = derivatives_as(loss_e, e.rows(), e.cols());
      const Matrix<double> exact_w = derivatives_as(loss_w, c.weight.rows(), c.weight.cols());
      const double floor =
          e.cwiseAbs().maxCoeff() / c.settings.temperature / c.layout.group_count() * 1e-3;
      for (const CodePath path : applicable_paths(c.layout)) {
        const std::string where =
            mode.name() + " " + path_name(path) + " seed " + std::to_string(seed - 1);
        const auto analytic = infonce_loss_and_gradient(e, c.layout, c.settings, path);
        const Matrix<double> analytic_w =
            encode_backward(c.weight, c.features, c.normalize, analytic.grad_embeddings);
        loss_worst.add(scalar_relative_error(analytic.loss, loss_e.value()), where);
        embeddings_worst.add(error_against(analytic.grad_embeddings, exact_e, floor), where);
        weight_worst.add(
            error_against(analytic_w, exact_w, floor * c.features.cwiseAbs().maxCoeff()), where);
        ++checks;
      }
    }
  }
  std::printf(
      "AutoDiff, %lld checks:\n  loss   max rel err %.3e  worst: %s\n"
      "  dL/dE  max rel err %.3e  worst: %s\n  dL/dW  max rel err %.3e  worst: %s\n",
      static_cast<long long>(checks), loss_worst.error, loss_worst.where.c_str(),
      embeddings_worst.error, embeddings_worst.where.c_str(), weight_worst.error,
      weight_worst.where.c_str());
  EXPECT_LE(loss_worst.error, 1e-13);
  EXPECT_LE(embeddings_worst.error, 1e-12);
  EXPECT_LE(weight_worst.error, 1e-12);
}

// The encoder alone: a loss sum_ij c_ij e_ij with random c, through the eps
// branch too (a row of zero features has norm 0 < eps).
TEST(AutoDiff, EncoderBackwardMatchesIncludingTheEpsBranch) {
  Rng rng(77);
  for (const bool normalize : {false, true}) {
    const Matrix<double> weight = random_matrix(rng, 3, 4, 1.0);
    Matrix<double> features = random_matrix(rng, 5, 4, 1.0);
    features.row(2).setZero();
    features.row(3) *= 1e-14;  // norm ~1e-14 < eps: e = y / eps
    const Matrix<double> upstream = random_matrix(rng, 5, 3, 1.0);
    const auto e = independent_encode(active_rows(weight), features, normalize);
    AD loss = AD(0.0);
    for (std::size_t i = 0; i < e.size(); ++i) {
      for (std::size_t j = 0; j < e[i].size(); ++j) {
        loss += e[i][j] * upstream(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j));
      }
    }
    const Matrix<double> exact = derivatives_as(loss, 3, 4);
    const Matrix<double> analytic = encode_backward(weight, features, normalize, upstream);
    EXPECT_LE(relative_error(analytic, exact), 1e-14) << "normalize " << normalize;
    const Matrix<double> forward = encode(weight, features, normalize);
    for (std::size_t i = 0; i < e.size(); ++i) {
      for (std::size_t j = 0; j < e[i].size(); ++j) {
        EXPECT_NEAR(forward(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j)),
                    e[i][j].value(), 1e-15);
      }
    }
  }
}

}  // namespace
}  // namespace infonce::loss::testing
