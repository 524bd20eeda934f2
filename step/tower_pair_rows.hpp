// The full batch of a two-tower micro-step (CLIP, SigLIP): every DP shard's
// image (or text) rows stacked in shard order, as the reference reads them.
#pragma once

#include <vector>

#include "casefile/tower_pair_batch.hpp"

namespace infonce::step {

Matrix<double> tower_pair_union_rows(const std::vector<TowerPairBatch>& shards, bool image);

}  // namespace infonce::step
