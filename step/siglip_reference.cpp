#include "step/siglip_reference.hpp"

#include "base/assert.hpp"
#include "loss/siglip.hpp"
#include "step/tower_pair_reference.hpp"

namespace infonce::step {
namespace {

template <class Scalar>
ReferenceValues siglip_reference_in(const Case& c) {
  const SigLipSettings& siglip = *c.siglip;
  const loss::SigLipLogitParameters parameters{siglip.log_scale, siglip.bias};
  INFONCE_ASSERT(direct_parameter_count(c) == 2);
  return tower_pair_reference<Scalar>(
      c, siglip.batches,
      tower_pair_towers(c, siglip.image_features, siglip.image_normalize, siglip.text_normalize),
      [&parameters](const loss::ClipTowers& towers, const Matrix<double>& image,
                    const Matrix<double>& text) {
        return loss::siglip_full_batch<Scalar>(towers, image, text, parameters);
      });
}

}  // namespace

ReferenceValues compute_siglip_reference(const Case& c) {
  INFONCE_ASSERT(c.siglip.has_value());
  return c.scalar == ScalarType::float64 ? siglip_reference_in<double>(c)
                                         : siglip_reference_in<float>(c);
}

}  // namespace infonce::step
