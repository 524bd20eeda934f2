// libFuzzer target for the infonce-case/1 reader (issue 5 point 6).
//
// parse_case must turn every byte string into either a Case or an
// InputError: any other exception, a sanitizer report, a hang or an
// allocation past -rss_limit_mb is a finding. A case that parses must also
// survive the writer: case_to_json(c) reads back, and writes the same bytes
// again (the canonical form is a fixed point).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "base/error.hpp"
#include "casefile/case.hpp"
#include "casefile/case_json.hpp"

namespace {

[[noreturn]] void report(const char* problem, const std::string& detail) {
  std::fprintf(stderr, "case_reader_fuzzer: %s: %s\n", problem, detail.c_str());
  std::abort();
}

// The writer's output of a valid case is itself a valid case, and
// canonical: reading and writing it again changes no byte.
void check_round_trip(const infonce::Case& c) {
  const std::string written = infonce::case_to_json(c);
  std::string rewritten;
  try {
    rewritten = infonce::case_to_json(infonce::parse_case(written));
  } catch (const infonce::InputError& error) {
    report("the written form of a valid case is rejected", error.what());
  }
  if (rewritten != written) report("writing is not a fixed point", written);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  infonce::Case parsed;
  try {
    parsed = infonce::parse_case(text);
  } catch (const infonce::InputError&) {
    return 0;  // bad input, reported as such: the expected outcome
  }
  // Anything else thrown by parse_case escapes and aborts: a finding.
  // The padding plan is the only other thing built from the parsed case
  // alone (it indexes padding_draws by DP shard).
  (void)infonce::reference_padding(parsed);
  check_round_trip(parsed);
  return 0;
}
