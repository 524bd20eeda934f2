// Speed work must not change a single result bit. The golden values below were
// recorded before any optimisation (commit b15a420) with:
//   build/infonce-sim check --seed 7 --cases 300 --format json
//     (standard output saved as tests/properties/golden/campaign-seed7-300.json)
// and the digests printed by this test's failure messages at that commit. A
// change to the numbers (generation, reference, the step, the properties)
// shows up here as a different report or digest; if such a change is meant,
// re-record both at the commit that makes it and say so in its message.
#include <cstring>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "base/error.hpp"
#include "properties/campaign.hpp"
#include "properties/campaign_report.hpp"
#include "sim/determinism.hpp"

#ifndef INFONCE_SOURCE_DIR
#error "INFONCE_SOURCE_DIR must name the source tree"
#endif

namespace infonce::properties {
namespace {

// FNV-1a over everything one case produced, in a fixed order.
class Digest {
 public:
  void add(std::uint64_t v) { hash_ = sim::fnv1a64_u64(v, hash_); }
  void add(double v) {
    std::uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    add(bits);
  }
  void add(const std::string& s) {
    add(static_cast<std::uint64_t>(s.size()));
    hash_ = sim::fnv1a64(std::as_bytes(std::span(s.data(), s.size())), hash_);
  }
  void add(std::span<const double> values) {
    add(static_cast<std::uint64_t>(values.size()));
    for (double v : values) add(v);
  }
  void add(const Matrix<double>& m) {
    add(static_cast<std::uint64_t>(m.rows()));
    add(std::span<const double>(m.data(), static_cast<std::size_t>(m.size())));
  }
  std::uint64_t value() const { return hash_; }

 private:
  std::uint64_t hash_ = sim::kFnvOffsetBasis;
};

void add_run(Digest& d, const step::DistributedResult& r) {
  d.add(std::span<const double>(r.losses));
  for (const auto& g : r.grads) d.add(std::span<const double>(g));
  d.add(static_cast<std::uint64_t>(r.padded_positives));
}

void add_verdict(Digest& d, const CaseVerdict& v) {
  d.add(static_cast<std::uint64_t>(v.discarded));
  d.add(v.discard_reason);
  for (const auto& f : v.failures) {
    d.add(f.property);
    d.add(f.detail);
  }
  d.add(v.report.loss);
  d.add(v.report.rel_err);
  d.add(v.report.scaled_err);
  d.add(static_cast<std::uint64_t>(v.uncompensated_checked));
  d.add(static_cast<std::uint64_t>(v.code_paths_checked));
}

// Every number of cases [0, cases) of `seed`: the spec, the reference, the
// step under FIFO and under a random schedule, and the verdicts of the
// correct system and of one mutant.
std::uint64_t digest_cases(std::uint64_t seed, std::int64_t cases, const GeneratorLimits& limits) {
  const step::Mutant* mutant = step::find_mutant("no-compensation");
  Digest d;
  for (std::int64_t i = 0; i < cases; ++i) {
    const CaseSpec spec = generate_spec(seed, i, limits);
    const Case c = build_case(spec);
    d.add(describe(spec));
    try {
      const step::ReferenceValues ref = step::compute_case_reference(c);
      d.add(ref.loss);
      d.add(std::span<const double>(ref.shard_losses));
      d.add(ref.grad);
      d.add(ref.grad_magnitude);
    } catch (const InputError& e) {
      d.add(std::string(e.what()));
      continue;
    }
    try {
      add_run(d, step::run_on_fibers(c, {}, {}));
      step::RunOptions random;
      random.schedule = {sim::ScheduleKind::random, 3};
      add_run(d, step::run_on_fibers(c, {}, random));
    } catch (const std::exception& e) {
      d.add(std::string(e.what()));
    }
    // Without oracle-agrees (added after the recording): the digests pin the
    // numbers of the step, the reference and the properties they judge.
    add_verdict(d, check_case(c, {.mutant = nullptr, .schedule_seed = 5, .oracle = OracleMode::off,
                                  .reduction_order_seed = std::nullopt}));
    add_verdict(d, check_case(c, {.mutant = mutant, .schedule_seed = 5, .oracle = OracleMode::off,
                                  .reduction_order_seed = std::nullopt}));
  }
  return d.value();
}

TEST(BitIdentity, TypicalCasesGiveTheRecordedBits) {
  EXPECT_EQ(digest_cases(11, 2000, typical_limits()), 0x1e83aefb5b4c700eULL);
}

TEST(BitIdentity, DefaultCasesGiveTheRecordedBits) {
  EXPECT_EQ(digest_cases(12, 300, default_limits()), 0x090815cde231e7faULL);
}

TEST(BitIdentity, CampaignReportIsTheRecordedOne) {
  CampaignReport report;
  report.seed = 7;
  report.case_budget = 300;
  CampaignOptions options;
  options.seed = 7;
  options.cases = 300;
  report.result = run_campaign(options);
  std::ifstream in(std::string(INFONCE_SOURCE_DIR) +
                   "/tests/properties/golden/campaign-seed7-300.json");
  ASSERT_TRUE(in) << "golden report missing";
  std::stringstream golden;
  golden << in.rdbuf();
  EXPECT_EQ(report_to_json(report), golden.str());
}

}  // namespace
}  // namespace infonce::properties
