// The shape of a generated case: everything RapidCheck chooses and shrinks.
// The numbers (features, weights) are not shrunk: they come from a seeded Rng
// stream (`data_seed`), so a spec is small, prints in one line, and the same
// spec always builds the same case bit for bit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "casefile/case.hpp"

namespace infonce::properties {

struct CaseSpec {
  std::int32_t world = 1;
  std::int32_t dp = 1;
  // [micro][dp rank][group] -> negatives k_g.
  std::vector<std::vector<std::vector<std::int32_t>>> negatives{{{0}}};
  bool accumulation_normalize = true;
  std::int32_t feature_dim = 1;
  std::int32_t embedding_dim = 1;
  bool normalize = true;
  bool use_batch = true;
  std::int32_t hard_negatives = 0;  // 0: unset
  bool mask_fake_negative = false;
  double fake_neg_margin = 0.1;
  bool include_qq = false;
  bool include_dd = false;
  double temperature = 0.1;
  Reduction reduction = Reduction::mean;
  GatherPath gather = GatherPath::object;
  ScalarType scalar = ScalarType::float64;
  std::uint64_t data_seed = 0;
  std::uint64_t rng_seed = 0;

  std::int32_t accumulation_steps() const { return static_cast<std::int32_t>(negatives.size()); }
};

// The correct system (compensation on, fixed padding, synced generators),
// with the numbers drawn from Rng(data_seed). Padding draws are recorded in
// the case, so another framework can replay it exactly.
Case build_case(const CaseSpec& spec);

// One line, e.g. "W=4 P=2 A=1 groups=[[1,2],[0,1]] F=2 D=3 ...".
std::string describe(const CaseSpec& spec);

}  // namespace infonce::properties
