// SPEC section 11: the CLIP loss of one batch of N pairs. The forward alone,
// for any scalar (long double, or an AutoDiff scalar whose derivatives check
// clip_loss_backward).
#pragma once

#include <cmath>
#include <cstddef>
#include <optional>
#include <vector>

#include "base/assert.hpp"
#include "oracle/real.hpp"
#include "oracle/scalar.hpp"
#include "oracle/softmax_cross_entropy.hpp"

namespace infonce::oracle {

// Row r of one direction's logits: scale * queries_r . docs_j (+ bias) for
// every j, one plain dot product per entry.
template <class S>
std::vector<S> clip_logit_row(const Rows<S>& queries, Eigen::Index r, const Rows<S>& docs,
                              const S& scale, const std::optional<S>& bias) {
  std::vector<S> logits;
  logits.reserve(static_cast<std::size_t>(docs.rows()));
  for (Eigen::Index j = 0; j < docs.rows(); ++j) {
    S logit = scale * dot_rows(queries, r, docs, j);
    if (bias) logit += *bias;
    logits.push_back(logit);
  }
  return logits;
}

// The mean over query rows of the cross-entropy, row r's target being doc r
// (the diagonal): image to text with (image, text), text to image swapped.
template <class S>
S clip_direction_loss(const Rows<S>& queries, const Rows<S>& docs, const S& scale,
                      const std::optional<S>& bias) {
  INFONCE_ASSERT(queries.rows() == docs.rows() && queries.rows() > 0);
  const std::vector<bool> kept(static_cast<std::size_t>(docs.rows()), true);  // nothing masked
  S total(0);
  for (Eigen::Index r = 0; r < queries.rows(); ++r) {
    total += kept_cross_entropy(clip_logit_row(queries, r, docs, scale, bias), kept,
                                static_cast<std::size_t>(r));
  }
  return total / S(static_cast<Real>(queries.rows()));
}

// L = (mean CE(image -> text) + mean CE(text -> image)) / 2, scale = exp(log_scale).
template <class S>
S clip_batch_loss(const Rows<S>& image, const Rows<S>& text, const S& log_scale,
                  const std::optional<S>& bias) {
  using std::exp;
  const S scale = exp(log_scale);
  return (clip_direction_loss(image, text, scale, bias) +
          clip_direction_loss(text, image, scale, bias)) /
         S(2);
}

}  // namespace infonce::oracle
