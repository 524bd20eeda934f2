#include "properties/point_comparison.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "step/run_case.hpp"

namespace infonce::properties {
namespace {

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.6g", value);
  return text;
}

// |x - y| within the tolerance on `scale` (at least the point's own size),
// the cancellation allowance growing with the point's multiple of the scale.
bool values_agree(double error, double scale, double point_size, double cancellation,
                  step::Tolerance t) {
  const double multiple = scale > 0 ? std::max(point_size / scale, 1.0) : 1.0;
  return std::isfinite(error) &&
         error <= t.atol + t.rtol * std::max(scale, point_size) + multiple * cancellation;
}

std::optional<PointDifference> compare_losses(const step::DistributedResult& observed,
                                              const step::DistributedResult& point,
                                              const PointAllowance& a) {
  for (std::size_t w = 0; w < observed.losses.size() && w < point.losses.size(); ++w) {
    if (losses_agree(observed.losses[w], point.losses[w], a)) continue;
    return PointDifference{"loss differs from the point's rank program",
                           "rank " + std::to_string(w) + " reports " + number(observed.losses[w]) +
                               ", the point's rank program " + number(point.losses[w])};
  }
  return std::nullopt;
}

std::optional<PointDifference> compare_encoders(const Case& c, const std::vector<double>& observed,
                                                const std::vector<double>& point,
                                                const PointAllowance& a) {
  const auto weights = static_cast<std::size_t>(c.weight.size());
  double error = 0, point_size = 0, dot = 0, norm2 = 0;
  for (std::size_t i = 0; i < weights; ++i) {
    error = std::max(error, std::abs(observed[i] - point[i]));
    point_size = std::max(point_size, std::abs(point[i]));
    dot += observed[i] * point[i];
    norm2 += point[i] * point[i];
  }
  if (values_agree(error, a.encoder_scale, point_size, a.encoder_cancellation, a.tolerance)) {
    return std::nullopt;
  }
  return PointDifference{
      "encoder gradient differs from the point's rank program",
      "max |grad - point's| = " + number(error) + " (point's max " + number(point_size) +
          (norm2 > 0 ? ", grad = " + number(dot / norm2) + " x the point's along it" : "") + ")"};
}

std::optional<PointDifference> compare_direct(const Case& c, const std::vector<double>& observed,
                                              const std::vector<double>& point,
                                              const PointAllowance& a) {
  const auto weights = static_cast<std::size_t>(c.weight.size());
  const std::vector<std::string> names = direct_parameter_names(c);
  for (std::size_t i = 0; i < names.size() && weights + i < point.size(); ++i) {
    const double value = observed.at(weights + i), expected = point[weights + i];
    const double scale = i < a.direct_scale.size() ? a.direct_scale[i] : 0.0;
    const double cancellation = i < a.direct_cancellation.size() ? a.direct_cancellation[i] : 0.0;
    if (values_agree(std::abs(value - expected), scale, std::abs(expected), cancellation,
                     a.tolerance)) {
      continue;
    }
    return PointDifference{
        "direct gradient differs from the point's rank program",
        names[i] + ": " + number(value) + ", the point's rank program " + number(expected)};
  }
  return std::nullopt;
}

}  // namespace

// Two losses agree within the tolerance on the loss's size and its logits'
// rounding; two non-finite values agree when they are the same (NaN: both NaN).
bool losses_agree(double observed, double point, const PointAllowance& a) {
  if (std::isnan(observed) || std::isnan(point)) return std::isnan(observed) && std::isnan(point);
  if (std::isinf(observed) || std::isinf(point)) return observed == point;
  const step::Tolerance& t = a.tolerance;
  return std::abs(observed - point) <=
         t.atol + t.rtol * std::max(std::abs(point), 1.0) + a.loss_cancellation;
}

std::optional<PointDifference> compare_results(const Case& c,
                                               const step::DistributedResult& observed,
                                               const step::DistributedResult& point,
                                               const PointAllowance& allowance) {
  if (auto loss = compare_losses(observed, point, allowance)) return loss;
  if (auto encoders = compare_encoders(c, observed.grads.at(0), point.grads.at(0), allowance)) {
    return encoders;
  }
  return compare_direct(c, observed.grads.at(0), point.grads.at(0), allowance);
}

std::optional<PointDifference> compare_with_point(const Case& c,
                                                  const step::DistributedResult& observed,
                                                  const PointAllowance& allowance,
                                                  const std::vector<double>* expected_losses) {
  step::RunOptions options;
  options.share_identical_losses = true;
  step::DistributedResult point = step::run_on_fibers(c, step::StepVariant{}, options);
  if (expected_losses != nullptr) point.losses = *expected_losses;
  return compare_results(c, observed, point, allowance);
}

}  // namespace infonce::properties
