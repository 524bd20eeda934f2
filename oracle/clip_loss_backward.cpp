#include "oracle/clip_loss_backward.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "base/assert.hpp"
#include "oracle/scalar.hpp"
#include "oracle/softmax_cross_entropy.hpp"

namespace infonce::oracle {
namespace {

// One direction's queries and docs with the gradients they collect.
struct Direction {
  const RealRows& queries;
  const RealRows& docs;
  RealRows& grad_queries;
  RealRows& grad_docs;
  RealRows& bound_queries;
  RealRows& bound_docs;
};

// Buffers reused from row to row.
struct Scratch {
  std::vector<Real> similarities, logits, probabilities;
  std::vector<bool> kept;
};

void add_term(ScalarGradient& gradient, Real term, Real bound) {
  gradient.value += term;
  gradient.magnitude += std::abs(term);
  gradient.bound += bound;
}

// Adds row r's loss and gradient, each term weighted by `weight` (1 / (2N)).
void add_row(const Direction& direction, Eigen::Index r, Real scale, std::optional<Real> bias,
             Real weight, Scratch& scratch, ClipLossAndGradient& out) {
  const RealRows& docs = direction.docs;
  scratch.similarities.clear();
  scratch.logits.clear();
  for (Eigen::Index j = 0; j < docs.rows(); ++j) {
    const Real similarity = dot_rows(direction.queries, r, docs, j);
    scratch.similarities.push_back(similarity);
    scratch.logits.push_back(scale * similarity + bias.value_or(0));
    out.max_abs_logit = std::max(out.max_abs_logit, std::abs(scratch.logits.back()));
  }
  scratch.kept.assign(scratch.logits.size(), true);
  const Real log_sum = kept_softmax(scratch.logits, scratch.kept, scratch.probabilities);
  const auto target = static_cast<std::size_t>(r);
  out.loss += weight * (log_sum - scratch.logits[target]);
  for (Eigen::Index j = 0; j < docs.rows(); ++j) {
    const auto e = static_cast<std::size_t>(j);
    const Real softmax = scratch.probabilities[e];
    const Real d_logit = weight * (e == target ? softmax - 1 : softmax);
    const Real d_logit_bound = weight * (e == target ? softmax + 1 : softmax);
    direction.grad_queries.row(r) += d_logit * scale * docs.row(j);
    direction.grad_docs.row(j) += d_logit * scale * direction.queries.row(r);
    direction.bound_queries.row(r) += d_logit_bound * scale * docs.row(j).cwiseAbs();
    direction.bound_docs.row(j) += d_logit_bound * scale * direction.queries.row(r).cwiseAbs();
    const Real similarity = scratch.similarities[e];
    add_term(out.log_scale, d_logit * scale * similarity,
             d_logit_bound * scale * std::abs(similarity));
    if (bias) add_term(out.bias, d_logit, d_logit_bound);
    out.logit_gradient_bound += d_logit_bound;
  }
}

}  // namespace

ClipLossAndGradient clip_batch_loss_backward(const RealRows& image, const RealRows& text,
                                             Real log_scale, std::optional<Real> bias) {
  INFONCE_ASSERT(image.rows() == text.rows() && image.rows() > 0);
  INFONCE_ASSERT(image.cols() == text.cols());
  ClipLossAndGradient out;
  out.grad_image = RealRows::Zero(image.rows(), image.cols());
  out.grad_text = out.grad_image;
  out.grad_image_bound = out.grad_image;
  out.grad_text_bound = out.grad_image;
  const Real scale = std::exp(log_scale);
  const Real weight = 1 / (2 * static_cast<Real>(image.rows()));  // half of a mean over N rows
  const Direction image_to_text{
      image, text, out.grad_image, out.grad_text, out.grad_image_bound, out.grad_text_bound};
  const Direction text_to_image{
      text, image, out.grad_text, out.grad_image, out.grad_text_bound, out.grad_image_bound};
  Scratch scratch;
  for (const Direction* direction : {&image_to_text, &text_to_image}) {
    for (Eigen::Index r = 0; r < image.rows(); ++r) {
      add_row(*direction, r, scale, bias, weight, scratch, out);
    }
  }
  return out;
}

}  // namespace infonce::oracle
