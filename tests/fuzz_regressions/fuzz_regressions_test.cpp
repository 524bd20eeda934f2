// Replays the fuzzer's inputs through parse_case (fuzz/README.md): every file
// in fuzz/regressions/ (inputs that once crashed or hung the reader) and in
// fuzz/seeds/ must either parse or throw InputError -- never another
// exception, a crash or a sanitizer report -- and a case that parses must
// read back from its written form to the same bytes, as the fuzzer checks.
// Hangs are caught by replaying the same files through the fuzzer binary,
// whose -timeout turns one into a failure.
#include <algorithm>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/error.hpp"
#include "casefile/case.hpp"
#include "casefile/case_json.hpp"

namespace infonce {
namespace {

namespace fs = std::filesystem;

const fs::path kFuzzDir = fs::path(INFONCE_SOURCE_DIR) / "fuzz";

std::vector<fs::path> files_in(const fs::path& directory) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(directory)) {
    if (entry.is_regular_file() && entry.path().filename().string().front() != '.') {
      files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string contents(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

enum class Outcome { parsed, input_error, other_exception };

struct Replay {
  Outcome outcome = Outcome::other_exception;
  std::string message;
};

// Parses `text` and, when it is a case, checks the written form reads back
// to the same bytes.
Replay replay(const std::string& text) {
  std::optional<Case> parsed;
  try {
    parsed = parse_case(text);
  } catch (const InputError& error) {
    return {Outcome::input_error, error.what()};
  } catch (const std::exception& error) {
    return {Outcome::other_exception, error.what()};
  }
  const std::string written = case_to_json(*parsed);
  try {
    EXPECT_EQ(case_to_json(parse_case(written)), written) << "writing is not a fixed point";
  } catch (const std::exception& error) {
    ADD_FAILURE() << "the written form of a parsed case is rejected: " << error.what();
  }
  return {Outcome::parsed, ""};
}

TEST(FuzzRegressions, EveryRegressionInputParsesOrThrowsInputError) {
  const std::vector<fs::path> files = files_in(kFuzzDir / "regressions");
  ASSERT_FALSE(files.empty()) << "no inputs in " << (kFuzzDir / "regressions");
  for (const fs::path& file : files) {
    const Replay result = replay(contents(file));
    EXPECT_NE(result.outcome, Outcome::other_exception)
        << file.filename() << ": an exception other than InputError: " << result.message;
  }
}

// The seeds say by name what they are: valid-* and real-* (copies of the
// real-trainer corpus) parse, bad-* are rejected with an InputError.
TEST(FuzzRegressions, SeedsParseOrAreRejectedAsTheirNamesSay) {
  const std::vector<fs::path> files = files_in(kFuzzDir / "seeds");
  ASSERT_GE(files.size(), 10u);
  for (const fs::path& file : files) {
    const std::string name = file.filename().string();
    const Replay result = replay(contents(file));
    if (name.starts_with("bad-")) {
      EXPECT_EQ(result.outcome, Outcome::input_error) << name;
      // One line, starting with the JSON path of the offending key.
      EXPECT_EQ(result.message.find('\n'), std::string::npos) << name << ": " << result.message;
      EXPECT_NE(result.message.find(": "), std::string::npos) << name << ": " << result.message;
    } else {
      ASSERT_TRUE(name.starts_with("valid-") || name.starts_with("real-")) << name;
      EXPECT_EQ(result.outcome, Outcome::parsed) << name << ": " << result.message;
    }
  }
}

}  // namespace
}  // namespace infonce
