// The NT-Xent family of a case (SPEC section 14): N samples seen twice, one
// shared encoder (Case::weight, D x F) and a temperature (with the case's
// "learnable_temperature", the inverse temperature is a parameter, as for
// InfoNCE). The case file holds it under "family": "ntxent" and the "ntxent"
// object: {"encoder": {"normalize", "weight"}, "temperature", "batches"},
// each shard's batch {"first": n x F, "second": n x F}, row i of each being
// sample i's two views.
#pragma once

#include <vector>

#include "loss/matrix.hpp"

namespace infonce {

// One DP shard's micro-batch: n >= 1 samples.
struct NtXentShardBatch {
  Matrix<double> first;   // n x F
  Matrix<double> second;  // n x F
};

struct NtXentSettings {
  bool normalize = true;
  double temperature = 0.5;  // logits r_k . r_j / T (tau = 1 / T when learnable)
  std::vector<std::vector<NtXentShardBatch>> batches;  // [micro][dp rank]
};

}  // namespace infonce
