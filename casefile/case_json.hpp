// Reading and writing `infonce-case/1` JSON (MODEL.md section 7) with nlohmann-json.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "casefile/case.hpp"

namespace infonce {

// Throws InputError with a one-line message naming the key (as a JSON path,
// e.g. "batches[0][1][2][3]: expected 6 numbers, got 5").
Case parse_case(std::string_view json_text);
Case read_case_file(const std::filesystem::path& path);

// Canonical JSON: keys in a fixed order, doubles printed to round-trip
// exactly (17 significant digits), so the same case gives the same bytes.
std::string case_to_json(const Case& c);
void write_case_file(const Case& c, const std::filesystem::path& path);

}  // namespace infonce
