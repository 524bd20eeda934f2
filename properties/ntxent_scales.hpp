// How far an NT-Xent step's cancelled softmax terms may round (SPEC section
// 14), as strategy_campaign.cpp bounds InfoNCE's and CLIP's: a logit is f s
// with f = 1/T (tau), so each dL/de row's terms reach f m (m: the largest
// embedding norm, 1 when normalised) over the rows before the softmax's
// cancellation; per dL/dW entry 4 f m times the largest column sum of |x|,
// over the samples, times P (a local loss averages over one shard's rows).
#pragma once

#include "casefile/case.hpp"

namespace infonce::properties {

struct NtXentScales {
  double encoders = 0;
  double inverse_temperature = 0;  // terms of dL/dtau: (p + y) |s| <= 2 m^2 per row, twice
  double largest_logit = 0;        // f m^2
};

NtXentScales ntxent_cancellation_scales(const Case& c);

}  // namespace infonce::properties
