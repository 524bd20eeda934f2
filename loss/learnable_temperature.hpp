// A learnable InfoNCE temperature, with the parameter stored as the inverse
// temperature tau = 1/T (logits = tau * similarity), and its exact gradient.
//
// Every logit of SPEC section 2 is z = tau * <e_a, e_b> for two embedding rows
// (qd, qq and dd blocks, use_batch on or off); the fake-negative mask compares
// raw similarities with a threshold that carries no gradient, so for the mask
// the loss actually applied, L is a function of the z alone. Each z is
// homogeneous of degree 2 in the rows, hence (Euler)
//     sum over rows of <E_r, dL/dE_r> = sum_z dL/dz * 2 z = 2 tau dL/dtau,
// and dL/dtau = <E, dL/dE> / (2 tau). This is exact for the loss with its
// mask held as computed, so it reuses the checked backward for dL/dE instead
// of a second copy of every mode's logit layout. (tests/loss/
// learnable_temperature_test.cpp checks it against finite differences of the
// forward in every mode.)
//
// New entry points only: infonce_loss_and_gradient keeps its behaviour.
#pragma once

#include "loss/groups.hpp"
#include "loss/infonce.hpp"
#include "loss/matrix.hpp"
#include "loss/settings.hpp"

namespace infonce::loss {

template <class Scalar>
struct InverseTemperatureGradient {
  Scalar value = 0;      // dL/dtau
  Scalar magnitude = 0;  // sum |E_rc * G_rc| / (2 tau): the scale of its rounding error
};

// dL/dtau from the embeddings E and the loss's dL/dE, for the whole batch the
// loss saw (on a rank: every gathered row, live or not, since tau itself is
// never detached). tau must be finite and > 0.
template <class Scalar>
InverseTemperatureGradient<Scalar> inverse_temperature_gradient(
    const Matrix<Scalar>& embeddings, const Matrix<Scalar>& grad_embeddings,
    double inverse_temperature);

template <class Scalar>
struct LearnableTemperatureResult {
  Scalar loss = 0;
  Matrix<Scalar> grad_embeddings;  // dL/dE
  InverseTemperatureGradient<Scalar> grad_inverse_temperature;
};

// infonce_loss_and_gradient with T = 1 / tau (settings.temperature ignored),
// plus dL/dtau. Throws InputError for a tau that is not finite and > 0.
template <class Scalar>
LearnableTemperatureResult<Scalar> infonce_with_learnable_temperature(
    const Matrix<Scalar>& embeddings, const GroupLayout& layout, LossSettings settings,
    double inverse_temperature, CodePath path = CodePath::automatic);

}  // namespace infonce::loss
