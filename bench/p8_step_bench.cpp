// One fixed data-parallel step at P = 8 (W = 8, 3 groups per rank, 3
// negatives, F = D = 6, use_batch, qq + masking), run N times on the fibers.
// Run it under `valgrind --tool=callgrind` to split instructions between the
// loss arithmetic and the simulation (fibers, collectives, bookkeeping).
// Usage: p8_step_bench [runs=200]
#include <cstdio>
#include <cstdlib>

#include "properties/case_spec.hpp"
#include "step/run_case.hpp"

int main(int argc, char** argv) {
  using namespace infonce;
  const int runs = argc > 1 ? std::atoi(argv[1]) : 200;
  properties::CaseSpec spec;
  spec.world = 8;
  spec.dp = 8;
  spec.negatives.assign(1, std::vector<std::vector<std::int32_t>>(8, {3, 3, 3}));
  spec.feature_dim = 6;
  spec.embedding_dim = 6;
  spec.include_qq = true;
  spec.mask_fake_negative = true;
  spec.data_seed = 8;
  const Case c = properties::build_case(spec);
  double checksum = 0;
  for (int i = 0; i < runs; ++i) checksum += step::run_on_fibers(c, {}, {}).losses[0];
  std::printf("%d runs, checksum %.17g\n", runs, checksum);
  return 0;
}
