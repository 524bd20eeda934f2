#include "step/tower_pair_rows.hpp"

#include "base/assert.hpp"

namespace infonce::step {

Matrix<double> tower_pair_union_rows(const std::vector<TowerPairBatch>& shards, bool image) {
  INFONCE_ASSERT(!shards.empty());
  Eigen::Index rows = 0;
  for (const TowerPairBatch& shard : shards) rows += shard.image.rows();
  const Eigen::Index cols = image ? shards.front().image.cols() : shards.front().text.cols();
  Matrix<double> out(rows, cols);
  Eigen::Index next = 0;
  for (const TowerPairBatch& shard : shards) {
    out.middleRows(next, shard.image.rows()) = image ? shard.image : shard.text;
    next += shard.image.rows();
  }
  return out;
}

}  // namespace infonce::step
