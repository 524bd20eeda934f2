// What the two-tower families' cases from a spec share (properties/
// clip_case.hpp, properties/siglip_case.hpp): the pairs of every shard and the
// one-line description; each family adds its own direct parameters.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/rng.hpp"
#include "casefile/tower_pair_batch.hpp"
#include "properties/case_spec.hpp"

namespace infonce::properties {

// [micro][dp shard]: one pair per group of the spec (at least one), F_image =
// F_text = the spec's F, standard normal from `rng`, the spec's feature style
// applied to each tower's rows.
std::vector<std::vector<TowerPairBatch>> draw_tower_pair_batches(Rng& rng, const CaseSpec& spec);

// One line with only what a two-tower case reads from the spec; `bias_axis`
// names what the spec's include_qq means for the family, e.g. "bias".
std::string describe_tower_pair_case(const CaseSpec& spec, std::string_view bias_axis);

}  // namespace infonce::properties
