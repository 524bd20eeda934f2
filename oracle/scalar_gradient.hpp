// A gradient that is one number (a logit scale, a bias, an inverse
// temperature), with the two error scales the oracle's judges read.
#pragma once

#include "oracle/real.hpp"

namespace infonce::oracle {

// Its value, the sum of its terms' |.|, and their bound with softmax - onehot
// taken apart.
struct ScalarGradient {
  Real value = 0;
  Real magnitude = 0;
  Real bound = 0;
};

}  // namespace infonce::oracle
