#include "oracle/logit_magnitude.hpp"

#include <algorithm>
#include <cmath>

#include "oracle/encoder.hpp"

namespace infonce::oracle {

RealRows encoding_magnitude(const RealRows& weight, const RealRows& sentences, bool normalize) {
  RealRows out = sentences.cwiseAbs() * weight.cwiseAbs().transpose();
  if (!normalize) return out;
  const RealRows encoded = sentences * weight.transpose();
  for (Eigen::Index r = 0; r < out.rows(); ++r) {
    out.row(r) /= std::max(encoded.row(r).norm(), kNormalizeEps);
  }
  return out;
}

Real max_logit_magnitude(const RealRows& image_magnitude, const RealRows& text_magnitude,
                         Real scale, Real bias) {
  Real largest = 0;
  for (Eigen::Index i = 0; i < image_magnitude.rows(); ++i) {
    for (Eigen::Index j = 0; j < text_magnitude.rows(); ++j) {
      const Real terms = image_magnitude.row(i).dot(text_magnitude.row(j));
      largest = std::max(largest, scale * terms + std::abs(bias));
    }
  }
  return largest;
}

}  // namespace infonce::oracle
