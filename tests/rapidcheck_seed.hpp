// RapidCheck properties in ctest run derandomised (like Hypothesis' CI
// profile): every run checks the same cases, so a red test reproduces and a
// green one does not turn red by chance. Included by every test file with
// RapidCheck properties; it sets RapidCheck's seed before main, through
// RC_PARAMS (RapidCheck reads it on its first property).
//
//   INFONCE_RC_SEED unset   seed kDefaultRapidCheckSeed
//   INFONCE_RC_SEED=N       seed N
//   INFONCE_RC_SEED=random  a new seed every run (RapidCheck prints it on failure): explores
//
// A seed already in RC_PARAMS wins (RapidCheck's own way to reproduce a failure).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

namespace infonce::testing {

inline constexpr const char* kDefaultRapidCheckSeed = "1105";

inline bool is_decimal(const std::string& text) {
  if (text.empty() || text.size() > 19) return false;
  for (const char ch : text) {
    if (ch < '0' || ch > '9') return false;
  }
  return true;
}

// Runs once per test binary, during static initialisation.
inline const bool rapidcheck_seed_fixed = [] {
  const char* requested = std::getenv("INFONCE_RC_SEED");
  const std::string seed = requested != nullptr ? requested : kDefaultRapidCheckSeed;
  if (seed == "random") return false;
  if (!is_decimal(seed)) {
    std::fprintf(stderr, "INFONCE_RC_SEED: expected a decimal seed or 'random', got '%s'\n",
                 seed.c_str());
    std::exit(2);
  }
  const char* existing = std::getenv("RC_PARAMS");
  std::string params = existing != nullptr ? existing : "";
  if (params.find("seed=") != std::string::npos) return false;
  params += (params.empty() ? "seed=" : " seed=") + seed;
  return setenv("RC_PARAMS", params.c_str(), 1) == 0;
}();

}  // namespace infonce::testing
