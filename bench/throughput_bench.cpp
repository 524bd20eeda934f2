// Where a property-campaign case spends its time, measured side by side in
// one run: generation, the full-batch reference, one distributed step on the
// fibers, and the whole property check (reference + every property's runs).
// Usage: throughput_bench [cases=5000] [default|typical] [all|check]
// (check: only generation, build and check_case, for profiling them alone)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "properties/campaign.hpp"
#include "step/run_case.hpp"

namespace {

using Clock = std::chrono::steady_clock;

template <class F>
double seconds(F&& f) {
  const auto start = Clock::now();
  f();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  using namespace infonce;
  const std::int64_t cases = argc > 1 ? std::atoll(argv[1]) : 5000;
  const std::string limits_name = argc > 2 ? argv[2] : "typical";
  const bool stages = argc <= 3 || std::string(argv[3]) != "check";
  const properties::GeneratorLimits limits =
      limits_name == "default" ? properties::default_limits() : properties::typical_limits();

  std::vector<properties::CaseSpec> specs;
  std::vector<Case> built;
  const double generate = seconds([&] {
    for (std::int64_t i = 0; i < cases; ++i) {
      specs.push_back(properties::generate_case(1, i, limits).value());
    }
  });
  const double build = seconds([&] {
    for (const auto& spec : specs) built.push_back(properties::build_case(spec));
  });
  double checksum = 0;
  const double reference = seconds([&] {
    for (const auto& c : built) {
      if (!stages) break;
      try {
        checksum += step::compute_case_reference(c).loss;
      } catch (const std::exception&) {
      }
    }
  });
  const double distributed = seconds([&] {
    for (const auto& c : built) {
      if (!stages) break;
      try {
        checksum += step::run_on_fibers(c, {}, {}).losses[0];
      } catch (const std::exception&) {
      }
    }
  });
  const double check = seconds([&] {
    for (const auto& c : built) checksum += properties::check_case(c, {}).failures.size();
  });
  const double n = static_cast<double>(cases);
  std::printf("%lld cases, %s distribution (checksum %.6g)\n", static_cast<long long>(cases),
              limits_name.c_str(), checksum);
  std::printf("%-34s %12s %12s\n", "stage", "us/case", "cases/s");
  const auto row = [&](const char* name, double s) {
    std::printf("%-34s %12.2f %12.0f\n", name, 1e6 * s / n, n / s);
  };
  row("generate (RapidCheck)", generate);
  row("build case (numbers)", build);
  row("reference", reference);
  row("one distributed step (fibers)", distributed);
  row("check_case (all properties)", check);
  row("campaign case (generate+build+check)", generate + build + check);
  return 0;
}
