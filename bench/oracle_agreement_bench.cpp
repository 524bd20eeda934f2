// The oracle against the loss/ reference on campaign cases, the worst
// disagreement per dtype: the fraction of oracle-agrees' tolerance used (on
// the cases that property judges), and the gradient error over the gradient's
// scale (|G|, its summands, the oracle's bound on |G|); the loss error over the
// loss's scale (|loss|, and the largest |logit|: a saturated row's loss of 1e-13
// is computed as a difference of logits of 1e3 and rounds to 0). Each scale is at
// least the dtype's smallest normal number: a float32 gradient of 1e-81 is 0 there.
// A measurement, not a test: the property oracle-agrees judges every case.
// Usage: oracle_agreement_bench [first=0] [count=1000000] [default|typical] [seed=1]
// (split a long run into index ranges and run them side by side)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>

#include "base/error.hpp"
#include "properties/campaign.hpp"
#include "properties/oracle_agrees.hpp"
#include "step/run_case.hpp"

namespace {

// The largest value seen and the case it came from.
struct Maximum {
  double value = 0;
  std::int64_t index = -1;
  // Whether `candidate` (of case `i`) is the new maximum.
  bool raise(double candidate, std::int64_t i) {
    if (!(candidate > value)) return false;
    value = candidate;
    index = i;
    return true;
  }
};

struct Worst {
  std::int64_t cases = 0;
  Maximum used;  // of oracle-agrees' tolerance (properties/oracle_agrees.hpp)
  Maximum grad;  // |G_ref - G_oracle| / max(max|G_oracle|, max summand, max bound)
  Maximum loss;  // |L_ref - L_oracle| / max(|L_oracle|, max |logit|)
};

double max_abs(const infonce::Matrix<double>& m) {
  return m.size() ? m.cwiseAbs().maxCoeff() : 0;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace infonce;
  const std::int64_t first = argc > 1 ? std::atoll(argv[1]) : 0;
  const std::int64_t count = argc > 2 ? std::atoll(argv[2]) : 1'000'000;
  const std::string limits_name = argc > 3 ? argv[3] : "default";
  const std::uint64_t seed = argc > 4 ? std::strtoull(argv[4], nullptr, 10) : 1;
  const properties::GeneratorLimits limits =
      limits_name == "typical" ? properties::typical_limits() : properties::default_limits();
  Worst worst[2];  // float64, float32
  const bool verbose = std::getenv("ORACLE_BENCH_VERBOSE") != nullptr;
  std::int64_t discarded = 0, oracle_rejected = 0, not_judged = 0;
  for (std::int64_t i = first; i < first + count; ++i) {
    const Case c = properties::build_case(properties::generate_spec(seed, i, limits));
    step::ReferenceValues reference;
    try {
      reference = step::compute_case_reference(c);
    } catch (const InputError&) {
      ++discarded;
      continue;
    }
    if (!properties::oracle_applies(c, properties::OracleMode::every, i)) {
      ++not_judged;  // float32 with the fake-negative mask (properties/oracle_agrees.cpp)
      continue;
    }
    properties::OracleValues oracle;
    try {
      oracle = properties::oracle_values(c);
    } catch (const InputError& e) {
      if (c.loss.mask_fake_negative) {  // as oracle-agrees: an exact tie masked a whole row
        ++not_judged;
        continue;
      }
      ++oracle_rejected;
      std::printf("case %lld: oracle rejects what the reference accepts: %s\n",
                  static_cast<long long>(i), e.what());
      continue;
    }
    if (!properties::oracle_judges(c, oracle)) {
      ++not_judged;  // a mask near tie, or an undetermined embedding direction
      continue;
    }
    Worst& w = worst[c.scalar == ScalarType::float64 ? 0 : 1];
    ++w.cases;
    w.used.raise(properties::tolerance_used(c, reference, oracle), i);
    // A gradient that is 0 in exact arithmetic (every logit of a row tied)
    // has summands of 1e-21: the oracle's bound on |G| keeps the ratio meaningful.
    const double smallest_normal = c.scalar == ScalarType::float64
                                       ? std::numeric_limits<double>::min()
                                       : double{std::numeric_limits<float>::min()};
    const double scale =
        std::max({max_abs(oracle.values.grad), max_abs(oracle.values.grad_magnitude),
                  max_abs(oracle.grad_bound), smallest_normal});
    if (w.grad.raise(max_abs(reference.grad - oracle.values.grad) / scale, i) && verbose) {
      std::printf(
          "case %lld: grad err %.3e scale %.3e bound %.3e max|z| %.3e loss %.17g vs %.17g\n",
          static_cast<long long>(i), max_abs(reference.grad - oracle.values.grad), scale,
          max_abs(oracle.grad_bound), oracle.max_abs_logit, reference.loss, oracle.values.loss);
    }
    if (std::isfinite(oracle.values.loss)) {
      const double loss_scale =
          std::max({std::abs(oracle.values.loss), oracle.max_abs_logit, smallest_normal});
      if (w.loss.raise(std::abs(reference.loss - oracle.values.loss) / loss_scale, i) && verbose) {
        std::printf("case %lld: loss %.17g vs %.17g\n", static_cast<long long>(i), reference.loss,
                    oracle.values.loss);
      }
    }
  }
  std::printf(
      "seed %llu, %s, cases [%lld, %lld): %lld discarded by the reference, %lld not judged, %lld "
      "rejected by the oracle\n",
      static_cast<unsigned long long>(seed), limits_name.c_str(), static_cast<long long>(first),
      static_cast<long long>(first + count), static_cast<long long>(discarded),
      static_cast<long long>(not_judged), static_cast<long long>(oracle_rejected));
  const char* names[2] = {"float64", "float32"};
  for (int k = 0; k < 2; ++k) {
    std::printf(
        "%s: %lld cases, worst %.3e of the tolerance used (case %lld); worst gradient error %.3e "
        "of "
        "the gradient scale (case %lld), worst loss error %.3e of the loss scale (case %lld)\n",
        names[k], static_cast<long long>(worst[k].cases), worst[k].used.value,
        static_cast<long long>(worst[k].used.index), worst[k].grad.value,
        static_cast<long long>(worst[k].grad.index), worst[k].loss.value,
        static_cast<long long>(worst[k].loss.index));
  }
  return oracle_rejected == 0 ? 0 : 1;
}
