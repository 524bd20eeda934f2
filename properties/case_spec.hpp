// The shape of a generated case: everything RapidCheck chooses and shrinks.
// The numbers (features, weights) are not shrunk: they come from a seeded Rng
// stream (`data_seed`), so a spec is small, prints in one line, and the same
// spec always builds the same case bit for bit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/rng.hpp"
#include "casefile/case.hpp"

namespace infonce::properties {

// How the feature rows are drawn: normal, or shaped to hunt for trouble.
enum class FeatureStyle {
  normal,          // i.i.d. standard normal
  duplicated,      // some rows copies of an earlier row of their shard
  threshold_ties,  // a negative equal to its group's positive: an exact tie with the mask
                   // threshold (the generator pairs it with masking at margin 0)
  zero_rows,       // some rows zero: the eps branch of the L2 normalisation
  collinear,       // some rows multiples of their shard's first row
  magnitudes,      // every row scaled by 10^u, u uniform in [-4, 4]
};

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
  bool compensate = true;     // false: the trainer before the fix (gradient = reference / s)
  bool per_rank_rng = false;  // generated only where the step keeps one objective
  // Configured micro-steps beyond the accumulation window (SPEC section 12):
  // `negatives` holds the window's micro-steps; 0 writes no window key.
  std::int32_t idle_steps = 0;
  bool record_draws = false;  // arbitrary recorded padding_draws (only with hard_negatives)
  std::uint64_t draw_seed = 0;
  FeatureStyle features = FeatureStyle::normal;
  // How the step is run, not part of the case: the random interleaving
  // compared with FIFO, and the all-reduce summation order (0: rank order).
  std::uint64_t schedule_seed = 1;
  std::uint64_t reduction_order_seed = 0;

  // The micro-steps that run (the window).
  std::int32_t accumulation_steps() const { return static_cast<std::int32_t>(negatives.size()); }
};

// The correct system (compensation on, fixed padding, synced generators),
// with the numbers drawn from Rng(data_seed). Padding draws are recorded in
// the case, so another framework can replay it exactly.
Case build_case(const CaseSpec& spec);

const char* name_of(FeatureStyle style);
// The short names describe() gives the case's settings ("mean", "object", "f64").
const char* name_of(Reduction r);
const char* name_of(GatherPath g);
const char* name_of(ScalarType s);

// rows x cols standard normal numbers from `rng`, in row-major order.
Matrix<double> normal_matrix(Rng& rng, std::int64_t rows, std::int64_t cols);

// What a CLIP or NT-Xent case takes from the spec whatever its family: mesh,
// reduction, gather path, compensate, dtype and the accumulation.
Case pair_family_case(const CaseSpec& spec);

// The spec's feature style on rows that are not InfoNCE groups (a CLIP
// tower's, an NT-Xent view's): zero, duplicated and collinear rows and
// magnitudes; the mask-tie style is InfoNCE's only.
void apply_pair_style(Rng& rng, FeatureStyle style, Matrix<double>& rows);

// The mesh and the accumulation, e.g. "W=4 P=2 A=1" ("A=2(unnormalized)").
std::string describe_mesh(const CaseSpec& spec);

// One line, e.g. "W=4 P=2 A=1 groups=[[1,2],[0,1]] F=2 D=3 ...".
std::string describe(const CaseSpec& spec);

}  // namespace infonce::properties
