// How far a SigLIP step's sums may round (SPEC section 15), as
// strategy_campaign.cpp bounds InfoNCE's, CLIP's and NT-Xent's: a logit is
// f s + b with f = exp(log_scale), every image meets every text of its
// micro-step (no softmax normalises the N terms of a row), and each term of
// d L / d z is at most 1 / n (n: the scoring rank's own pairs, at least 1).
// So a dL/de row sums up to N terms of at most f m / n (m: the largest
// embedding norm, 1 when normalised), and per dL/dW entry that reaches
// 4 f m N_max P times the largest column sum of |x| over a shard's rows, over
// the case's pairs; dL/dlog_scale's terms f |s| / n reach 4 f m^2 N_max P over
// the pairs' images, dL/dbias's 4 N_max P.
#pragma once

#include "casefile/case.hpp"

namespace infonce::properties {

struct SigLipScales {
  double encoders = 0;
  double log_scale = 0;
  double bias = 0;
  double largest_logit = 0;  // f m^2 + |b|
};

SigLipScales siglip_cancellation_scales(const Case& c);

}  // namespace infonce::properties
