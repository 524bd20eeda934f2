// What the oracle's two-tower families (CLIP, SigLIP) share in reading a
// description: the towers' checks and a micro-step's batch, the union of its
// shards' pairs in shard order. An undefined case throws InputError
// "oracle: FAMILY ...", FAMILY the family's name. The oracle's own helper (it
// imports base/ alone).
#pragma once

#include <string>
#include <vector>

#include "oracle/clip_batch.hpp"
#include "oracle/clip_description.hpp"
#include "oracle/real.hpp"

namespace infonce::oracle {

// Throws unless `value` is finite: "oracle: FAMILY WHAT is not finite".
void require_finite_parameter(Real value, const std::string& family, const std::string& what);

// Both towers D x F with D, F >= 1 and one D, their weights, log_scale and
// exp(log_scale) finite (an infinite scale has no logits).
void check_tower_weights(const RealRows& image_weight, const RealRows& text_weight, Real log_scale,
                         const std::string& family);

// One batch per micro-step. Throws where a micro-step is missing or has no
// shards, or a shard has no pairs, image and text rows that disagree, a
// feature width that is not its tower's, or a non-finite number.
std::vector<ClipBatch> tower_pair_batches(
    const std::vector<std::vector<ClipShardInput>>& micro_steps, const RealRows& image_weight,
    const RealRows& text_weight, const std::string& family);

}  // namespace infonce::oracle
