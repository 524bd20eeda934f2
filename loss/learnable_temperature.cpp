#include "loss/learnable_temperature.hpp"

#include <cmath>
#include <sstream>
#include <string>

#include "base/error.hpp"

namespace infonce::loss {

namespace {

void check_inverse_temperature(double inverse_temperature) {
  if (!(inverse_temperature > 0) || !std::isfinite(inverse_temperature) ||
      !std::isfinite(1.0 / inverse_temperature)) {
    std::ostringstream out;
    out.precision(17);
    out << "inverse temperature (1/T) = " << inverse_temperature
        << " must be finite and > 0 with a finite T";
    throw InputError(out.str());
  }
}

}  // namespace

template <class Scalar>
InverseTemperatureGradient<Scalar> inverse_temperature_gradient(
    const Matrix<Scalar>& embeddings, const Matrix<Scalar>& grad_embeddings,
    double inverse_temperature) {
  check_inverse_temperature(inverse_temperature);
  if (embeddings.rows() != grad_embeddings.rows() || embeddings.cols() != grad_embeddings.cols()) {
    throw InputError("inverse_temperature_gradient: dL/dE does not have the shape of E");
  }
  // In index order: the value is a pure function of its inputs.
  Scalar sum = 0;
  Scalar magnitude = 0;
  for (Eigen::Index r = 0; r < embeddings.rows(); ++r) {
    for (Eigen::Index c = 0; c < embeddings.cols(); ++c) {
      const Scalar term = embeddings(r, c) * grad_embeddings(r, c);
      sum += term;
      magnitude += std::fabs(term);
    }
  }
  const auto twice_tau = static_cast<Scalar>(2.0 * inverse_temperature);
  return {sum / twice_tau, magnitude / twice_tau};
}

template <class Scalar>
LearnableTemperatureResult<Scalar> infonce_with_learnable_temperature(
    const Matrix<Scalar>& embeddings, const GroupLayout& layout, LossSettings settings,
    double inverse_temperature, CodePath path) {
  check_inverse_temperature(inverse_temperature);
  settings.temperature = 1.0 / inverse_temperature;
  LossAndGradient<Scalar> result =
      infonce_loss_and_gradient<Scalar>(embeddings, layout, settings, path);
  LearnableTemperatureResult<Scalar> out;
  out.loss = result.loss;
  out.grad_inverse_temperature =
      inverse_temperature_gradient(embeddings, result.grad_embeddings, inverse_temperature);
  out.grad_embeddings = std::move(result.grad_embeddings);
  return out;
}

#define INFONCE_INSTANTIATE(Scalar)                                               \
  template InverseTemperatureGradient<Scalar> inverse_temperature_gradient(       \
      const Matrix<Scalar>&, const Matrix<Scalar>&, double);                      \
  template LearnableTemperatureResult<Scalar> infonce_with_learnable_temperature( \
      const Matrix<Scalar>&, const GroupLayout&, LossSettings, double, CodePath);

INFONCE_INSTANTIATE(float)
INFONCE_INSTANTIATE(double)
INFONCE_INSTANTIATE(long double)

#undef INFONCE_INSTANTIATE

}  // namespace infonce::loss
