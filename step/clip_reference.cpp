#include "step/clip_reference.hpp"

#include "base/assert.hpp"
#include "loss/clip.hpp"
#include "step/tower_pair_reference.hpp"

namespace infonce::step {
namespace {

template <class Scalar>
ReferenceValues clip_reference_in(const Case& c) {
  const ClipSettings& clip = *c.clip;
  const loss::ClipLogitParameters parameters{clip.log_logit_scale, clip.logit_bias};
  // Every rank reports the global value (the CLIP family always gathers).
  return tower_pair_reference<Scalar>(
      c, clip.batches,
      tower_pair_towers(c, clip.image_features, clip.image_normalize, clip.text_normalize),
      [&parameters](const loss::ClipTowers& towers, const Matrix<double>& image,
                    const Matrix<double>& text) {
        return loss::clip_full_batch<Scalar>(towers, image, text, parameters);
      });
}

}  // namespace

ReferenceValues compute_clip_reference(const Case& c) {
  INFONCE_ASSERT(c.clip.has_value());
  return c.scalar == ScalarType::float64 ? clip_reference_in<double>(c)
                                         : clip_reference_in<float>(c);
}

}  // namespace infonce::step
