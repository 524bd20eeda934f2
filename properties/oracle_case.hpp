// A case as the oracle reads it (oracle/description.hpp): the plain numbers of
// the case file, labels written out from the layout, and the padding draws the
// step used. The oracle's values in the form the step's evaluation compares.
#pragma once

#include "casefile/case.hpp"
#include "loss/padding.hpp"
#include "oracle/clip_description.hpp"
#include "oracle/description.hpp"
#include "oracle/ntxent_description.hpp"
#include "oracle/siglip_description.hpp"
#include "step/run_case.hpp"

namespace infonce::properties {

// `draws`: [micro][dp shard], what the step's generators drew
// (step::record_padding_draws). A float32 case's numbers are rounded to float
// first: they are the inputs its step computes with.
oracle::Description oracle_description(const Case& c, const loss::RecordedDraws& draws);
// A CLIP-family case as the oracle reads it (oracle/clip_description.hpp).
oracle::ClipDescription oracle_clip_description(const Case& c);
// An NT-Xent case as the oracle reads it (oracle/ntxent_description.hpp).
oracle::NtXentDescription oracle_ntxent_description(const Case& c);
// A SigLIP case as the oracle reads it (oracle/siglip_description.hpp).
oracle::SigLipDescription oracle_siglip_description(const Case& c);

struct OracleValues {
  step::ReferenceValues values;  // the oracle's objective, widened to double
  double max_abs_logit = 0;
  double max_encoding_condition = 1;  // oracle::Result::max_encoding_condition
  double min_mask_gap = 0;            // oracle::Result::min_mask_gap
  Matrix<double> grad_bound;          // oracle::Result::grad_bound
  // The direct parameters' bounds (as grad_bound), in direct_parameter_names
  // order; their values and magnitudes are in `values`.
  std::vector<double> direct_bound;
  // Per direct parameter (same order): whether it is a log scale (CLIP's
  // log_logit_scale, SigLIP's log_scale), whose gradient's terms are
  // d loss / d z times c a . b and so round with the logits' terms.
  std::vector<bool> direct_is_log_scale;
  // The factor a similarity is multiplied by in a logit: 1/T, or CLIP's
  // exp(log_logit_scale), or SigLIP's exp(log_scale).
  double logit_factor = 1;
  // CLIP and SigLIP (0 elsewhere): oracle::max_logit_magnitude, the scale of
  // a logit's rounding; the sum over the logits of the bound on
  // |d loss / d z|, what the logits' rounding moves the loss by.
  double max_logit_magnitude = 0;
  double logit_gradient_bound = 0;
  // CLIP and SigLIP (0 elsewhere): how many nonnegative terms the loss adds
  // up (SigLIP: N^2 per micro-step; CLIP: 2N rows), and how many a direct
  // parameter's gradient does (SigLIP N^2, CLIP 2N^2), in the largest
  // micro-step, plus one per micro-step.
  double loss_terms = 0;
  double direct_terms = 0;
};

// The oracle's objective of `c`. Throws InputError where the oracle finds no
// defined loss.
OracleValues oracle_values(const Case& c);

}  // namespace infonce::properties
