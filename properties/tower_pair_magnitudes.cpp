#include "properties/tower_pair_magnitudes.hpp"

#include <algorithm>

#include "properties/embedding_norm.hpp"

namespace infonce::properties {

TowerPairMagnitudes tower_pair_magnitudes(const Case& c,
                                          const std::vector<std::vector<TowerPairBatch>>& batches,
                                          Eigen::Index image_features, bool image_normalize,
                                          bool text_normalize) {
  const Eigen::Index image = image_features;
  TowerPairMagnitudes out;
  for (std::int32_t m = 0; m < c.micro_steps_run(); ++m) {
    std::int64_t micro_pairs = 0;
    for (const TowerPairBatch& shard : batches[static_cast<std::size_t>(m)]) {
      micro_pairs += shard.image.rows();
      for (Eigen::Index r = 0; r < shard.image.rows(); ++r) {
        const double image_norm =
            (c.weight.leftCols(image) * shard.image.row(r).transpose()).norm();
        const double text_norm =
            (c.weight.rightCols(c.weight.cols() - image) * shard.text.row(r).transpose()).norm();
        out.max_norm = std::max({out.max_norm, encoder_row_factor(image_norm, image_normalize),
                                 encoder_row_factor(text_norm, text_normalize)});
        out.max_embedding =
            std::max({out.max_embedding, embedding_norm(image_norm, image_normalize),
                      embedding_norm(text_norm, text_normalize)});
      }
      out.feature_abs_sum =
          std::max({out.feature_abs_sum, shard.image.cwiseAbs().colwise().sum().maxCoeff(),
                    shard.text.cwiseAbs().colwise().sum().maxCoeff()});
    }
    out.pairs += micro_pairs;
    out.largest_micro_step = std::max(out.largest_micro_step, micro_pairs);
  }
  return out;
}

}  // namespace infonce::properties
