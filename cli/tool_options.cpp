#include "cli/tool_options.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <limits>
#include <ostream>
#include <sstream>
#include <thread>

#include "base/concat.hpp"
#include "base/error.hpp"
#include "base/rng.hpp"
#include "casefile/case_json.hpp"
#include "step/mutants.hpp"

namespace infonce::cli {
namespace po = boost::program_options;
namespace fs = std::filesystem;
namespace {

// Quoted for a message: at most 40 printable characters.
std::string shown(std::string_view text) {
  std::string out;
  for (const char ch : text.substr(0, 40)) {
    out += (static_cast<unsigned char>(ch) < 0x20 || static_cast<unsigned char>(ch) >= 0x7f) ? '?'
                                                                                             : ch;
  }
  return "'" + out + (text.size() > 40 ? "...'" : "'");
}

[[noreturn]] void usage(std::string_view command, std::string_view option,
                        const std::string& problem) {
  throw UsageError(std::string(command) + ": " + std::string(option) + " " + problem);
}

bool all_of(std::string_view text, int (*predicate)(int)) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [&](char ch) {
    return predicate(static_cast<unsigned char>(ch)) != 0;
  });
}

std::optional<std::uint64_t> parse_u64(std::string_view text, int base) {
  std::uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value, base);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& ch : out) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return out;
}

bool is_commit_hash(std::string_view text) {
  return text.size() >= 7 && text.size() <= 64 && all_of(text, isxdigit);
}

// `git rev-parse HEAD` in the working directory.
std::string head_commit(std::string_view command) {
  FILE* pipe = ::popen("git rev-parse HEAD 2>/dev/null", "r");
  if (pipe == nullptr) usage(command, "--seed git:", "cannot run git");
  char buffer[128] = {};
  const std::size_t read = std::fread(buffer, 1, sizeof buffer - 1, pipe);
  const int status = ::pclose(pipe);
  std::string hash(buffer, read);
  while (!hash.empty() && (hash.back() == '\n' || hash.back() == '\r')) hash.pop_back();
  if (status != 0 || !is_commit_hash(hash)) {
    usage(command,
          "--seed git:", "`git rev-parse HEAD` failed (not inside a git checkout?); give --seed N");
  }
  return lower(hash);
}

// What makes two corpus entries the same: the case, and the mutant it
// guards against (the seed and index that found it do not matter).
std::string corpus_identity(const Case& c) {
  Case bare = c;
  bare.found.reset();
  const bool mutant = c.found && c.found->mutant;
  return case_to_json(bare) + "guards: " + (mutant ? *c.found->mutant : std::string("-"));
}

std::string temporary_sibling(const fs::path& path) {
  return path.string() + ".tmp-" + std::to_string(::getpid());
}

}  // namespace

std::uint64_t seed_of_commit(std::string_view hex) {
  INFONCE_ASSERT(is_commit_hash(hex));
  const std::uint64_t prefix = *parse_u64(lower(hex.substr(0, 7)), 16);
  return derive_seed(0x636f6d6d6974ULL /* "commit" */, prefix);
}

SeedChoice parse_seed(std::string_view command, std::string_view text) {
  if (text == "git") {
    const std::string hash = head_commit(command);
    return {seed_of_commit(hash), "commit " + hash};
  }
  if (text.starts_with("commit:")) {
    const std::string_view hash = text.substr(7);
    if (!is_commit_hash(hash)) {
      usage(command, "--seed", "commit:HASH needs 7 to 64 hex digits, not " + shown(hash));
    }
    return {seed_of_commit(hash), "commit " + lower(hash)};
  }
  if (text.starts_with("0x") || text.starts_with("0X")) {
    const auto value = text.size() <= 18 ? parse_u64(text.substr(2), 16) : std::nullopt;
    if (!value || text.size() == 2) {
      usage(command, "--seed", "0x... must be 1 to 16 hex digits, not " + shown(text));
    }
    return {*value, ""};
  }
  if (all_of(text, isdigit)) {
    const auto value = parse_u64(text, 10);
    if (!value) usage(command, "--seed", shown(text) + " is beyond 2^64 - 1");
    return {*value, ""};
  }
  if (is_commit_hash(text)) return {seed_of_commit(text), "commit " + lower(text)};
  usage(
      command, "--seed",
      "must be a number, 0x<hex>, a commit hash (7 to 64 hex digits) or 'git', not " + shown(text));
}

std::int64_t parse_count(std::string_view command, std::string_view option, std::string_view text,
                         std::int64_t max) {
  const auto value = all_of(text, isdigit) ? parse_u64(text, 10) : std::nullopt;
  if (!value) usage(command, option, "must be a whole number, not " + shown(text));
  if (*value == 0) usage(command, option, "must be at least 1");
  if (*value > static_cast<std::uint64_t>(max)) {
    usage(command, option, "must be at most " + std::to_string(max) + ", not " + shown(text));
  }
  return static_cast<std::int64_t>(*value);
}

double parse_duration_seconds(std::string_view command, std::string_view text) {
  constexpr double kMax = 30.0 * 24 * 3600;
  const std::string bad = "must be a duration like 10m, 90s, 1h30m or 500ms, not " + shown(text);
  double total = 0;
  std::string_view rest = text;
  if (rest.empty()) usage(command, "--time-budget", bad);
  while (!rest.empty()) {
    std::size_t digits = 0;
    while (digits < rest.size() && std::isdigit(static_cast<unsigned char>(rest[digits]))) {
      ++digits;
    }
    if (digits == 0 || digits > 9) usage(command, "--time-budget", bad);
    const double amount = static_cast<double>(*parse_u64(rest.substr(0, digits), 10));
    rest.remove_prefix(digits);
    double unit = 0;
    for (const auto& [name, seconds] : {std::pair<std::string_view, double>{"ms", 0.001},
                                        {"s", 1.0},
                                        {"m", 60.0},
                                        {"h", 3600.0}}) {
      if (rest.starts_with(name) && (rest.size() == name.size() ||
                                     std::isdigit(static_cast<unsigned char>(rest[name.size()])))) {
        unit = seconds;
        rest.remove_prefix(name.size());
        break;
      }
    }
    if (unit == 0) usage(command, "--time-budget", bad);
    total += amount * unit;
  }
  if (total <= 0) usage(command, "--time-budget", "must be longer than 0");
  if (total > kMax) usage(command, "--time-budget", "must be at most 30 days (720h)");
  return total;
}

properties::ShardSpec parse_shard(std::string_view command, std::string_view text) {
  constexpr std::int64_t kMaxShards = 1 << 20;
  const std::size_t slash = text.find('/');
  const std::string bad = "must be I/N with 0 <= I < N (e.g. 0/4), not " + shown(text);
  if (slash == text.npos) usage(command, "--shard", bad);
  const std::string_view index_text = text.substr(0, slash), count_text = text.substr(slash + 1);
  // Plain integers: a false-positive maybe-uninitialized warning of g++ 12 on optionals.
  const std::uint64_t none = std::numeric_limits<std::uint64_t>::max();
  const std::uint64_t index =
      all_of(index_text, isdigit) ? parse_u64(index_text, 10).value_or(none) : none;
  const std::uint64_t count =
      all_of(count_text, isdigit) ? parse_u64(count_text, 10).value_or(none) : none;
  if (index == none || count == none || count == 0 || index >= count) {
    usage(command, "--shard", bad);
  }
  if (count > static_cast<std::uint64_t>(kMaxShards)) {
    usage(command, "--shard", "N must be at most " + std::to_string(kMaxShards));
  }
  return {static_cast<std::int64_t>(index), static_cast<std::int64_t>(count)};
}

std::int32_t parse_jobs(std::string_view command, std::string_view text) {
  constexpr std::int64_t kMaxJobs = 256;
  if (text == "auto") {
    return static_cast<std::int32_t>(
        std::clamp<std::int64_t>(std::thread::hardware_concurrency(), 1, kMaxJobs));
  }
  const auto value = all_of(text, isdigit) ? parse_u64(text, 10) : std::nullopt;
  if (!value || *value == 0 || *value > kMaxJobs) {
    usage(command, "--jobs",
          "must be a number of threads from 1 to " + std::to_string(kMaxJobs) + " or 'auto', not " +
              shown(text));
  }
  return static_cast<std::int32_t>(*value);
}

properties::GeneratorLimits parse_limits(std::string_view command, std::string_view text) {
  if (text == "default") return properties::default_limits();
  if (text == "typical") return properties::typical_limits();
  usage(command, "--limits", "must be 'default' or 'typical', not " + shown(text));
}

properties::OracleMode parse_oracle(std::string_view command, std::string_view text) {
  if (text == "every") return properties::OracleMode::every;
  if (text == "sampled") return properties::OracleMode::sampled;
  if (text == "off") return properties::OracleMode::off;
  usage(command, "--oracle", "must be 'every', 'sampled' or 'off', not " + shown(text));
}

const step::Mutant* parse_mutant(std::string_view command, std::string_view text) {
  if (text.empty() || text == "none") return nullptr;
  const step::Mutant* mutant = step::find_mutant(text);
  if (mutant == nullptr) {
    usage(command, "--mutant", shown(text) + " is unknown (see `infonce-sim mutants`)");
  }
  return mutant;
}

OutputFormat parse_format(std::string_view command, std::string_view text) {
  if (text == "human") return OutputFormat::human;
  if (text == "json") return OutputFormat::json;
  if (text == "junit") return OutputFormat::junit;
  usage(command, "--format", "must be 'human', 'json' or 'junit', not " + shown(text));
}

void check_writable_dir(std::string_view command, std::string_view option, const fs::path& dir) {
  std::error_code error;
  fs::path existing = dir.empty() ? fs::path(".") : dir;
  // The nearest existing ancestor must be a writable directory.
  while (!fs::exists(existing, error)) {
    if (!existing.has_parent_path() || existing.parent_path() == existing) {
      existing = ".";
      break;
    }
    existing = existing.parent_path();
  }
  if (!fs::is_directory(existing, error)) {
    usage(command, option,
          shown(dir.string()) + ": " + shown(existing.string()) + " is not a directory");
  }
  if (::access(existing.c_str(), W_OK) != 0) {
    usage(command, option,
          shown(dir.string()) + ": " + shown(existing.string()) + " is not writable");
  }
}

ReportFile parse_report_file(std::string_view command, const std::string& text) {
  const fs::path path(text);
  const std::string extension = lower(path.extension().string());
  ReportKind kind;
  if (extension == ".json") {
    kind = ReportKind::json;
  } else if (extension == ".xml") {
    kind = ReportKind::junit;
  } else if (extension == ".svg") {
    kind = ReportKind::svg;
  } else if (extension == ".html" || extension == ".htm") {
    kind = ReportKind::html;
  } else {
    usage(command, "--report", shown(text) + " must end in .json, .xml (JUnit), .svg or .html");
  }
  std::error_code error;
  if (fs::is_directory(path, error)) usage(command, "--report", shown(text) + " is a directory");
  const fs::path parent = path.has_parent_path() ? path.parent_path() : fs::path(".");
  if (!fs::is_directory(parent, error)) {
    usage(command, "--report", shown(text) + ": no directory " + shown(parent.string()));
  }
  if (::access(parent.c_str(), W_OK) != 0 ||
      (fs::exists(path, error) && ::access(path.c_str(), W_OK) != 0)) {
    usage(command, "--report", shown(text) + " is not writable");
  }
  return {path, kind};
}

void write_text_file_atomically(const fs::path& path, const std::string& text) {
  const std::string temporary = temporary_sibling(path);
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) {
      std::error_code ignored;
      fs::remove(temporary, ignored);
      throw InputError(path.string() + ": cannot write");
    }
  }
  std::error_code error;
  fs::rename(temporary, path, error);
  if (error) {
    fs::remove(temporary, error);
    throw InputError(path.string() + ": cannot write: " + error.message());
  }
}

void write_report_file(const ReportFile& file, const properties::CampaignReport& report) {
  std::ostringstream text;
  switch (file.kind) {
    case ReportKind::json:
      text << properties::report_to_json(report);
      break;
    case ReportKind::junit:
      properties::write_report_junit(text, report);
      break;
    case ReportKind::svg:
      properties::write_report_svg(text, report);
      break;
    case ReportKind::html:
      properties::write_report_html(text, report);
      break;
  }
  write_text_file_atomically(file.path, text.str());
}

std::filesystem::path save_corpus_case(const Case& c, const fs::path& dir) {
  const std::string identity = corpus_identity(c);
  std::uint64_t hash = 0xcbf29ce484222325ULL;  // FNV-1a
  for (const unsigned char ch : identity) hash = (hash ^ ch) * 0x100000001b3ULL;
  char stem[32];
  std::snprintf(stem, sizeof stem, "case-%016llx", static_cast<unsigned long long>(hash));
  std::error_code error;
  fs::create_directories(dir, error);
  if (error)
    throw InputError(dir.string() + ": cannot create the corpus directory: " + error.message());
  for (int suffix = 0;; ++suffix) {
    const fs::path path =
        dir / concat(stem, suffix ? concat("-", std::to_string(suffix)) : std::string(), ".json");
    if (!fs::exists(path, error)) {
      write_text_file_atomically(path, case_to_json(c));
      return path;
    }
    try {
      if (corpus_identity(read_case_file(path)) == identity) return path;  // already there
    } catch (const InputError&) {
      // An unreadable file is a different case: never overwritten.
    }
  }
}

void print_report(std::ostream& out, OutputFormat format,
                  const properties::CampaignReport& report) {
  switch (format) {
    case OutputFormat::human:
      properties::write_report_text(out, report);
      break;
    case OutputFormat::json:
      out << properties::report_to_json(report);
      break;
    case OutputFormat::junit:
      properties::write_report_junit(out, report);
      break;
  }
}

void record_failure(const CampaignSettings& s, properties::CampaignReport& report) {
  if (!report.result.failure) return;
  properties::CampaignFailure& failure = *report.result.failure;
  Finding found;
  if (!report.mutant.empty()) found.mutant = report.mutant;
  found.property = failure.failures.front().property;
  found.seed = report.seed;
  found.case_index = failure.case_index;
  found.limits = report.limits;
  failure.shrunk_case.found = found;
  if (s.save_corpus) {
    report.saved_case = save_corpus_case(failure.shrunk_case, s.corpus_dir).string();
  }
}

void add_sut_options(po::options_description& options, bool with_restrict) {
  options.add_options()("sut", po::value<std::string>()->value_name("CMD"),
                        "run every step in an external system under test: /bin/sh -c CMD "
                        "speaking infonce-sut/1 (docs/sut-protocol.md)")(
      "sut-timeout", po::value<std::string>()->value_name("DURATION"),
      "how long the SUT may take for its handshake or one response (default 60s)");
  if (!with_restrict) return;
  options.add_options()("restrict", po::value<std::vector<std::string>>()->value_name("AXIS=VALUE"),
                        "with --sut: generate less than the handshake allows, e.g. "
                        "hard_negatives=false, max_world=4 (repeatable)");
}

SutChoice parse_sut(std::string_view command, const std::optional<std::string>& sut,
                    const std::optional<std::string>& timeout) {
  SutChoice choice;
  if (!sut) {
    if (timeout) usage(command, "--sut-timeout", "needs --sut CMD");
    return choice;
  }
  if (sut->find_first_not_of(" \t") == std::string::npos) {
    usage(command, "--sut", "must be a command, not an empty string");
  }
  choice.command = *sut;
  choice.timeout_seconds = sut::kDefaultTimeoutSeconds;
  if (timeout) {
    // A bare number is seconds, as in the protocol's documentation.
    const bool digits = !timeout->empty() && all_of(*timeout, isdigit);
    try {
      choice.timeout_seconds = parse_duration_seconds(command, digits ? *timeout + "s" : *timeout);
    } catch (const UsageError&) {
      usage(command, "--sut-timeout",
            "must be a duration such as 2s, 90s or 5m (or whole seconds), not " + shown(*timeout));
    }
    choice.timeout_text = *timeout;
  }
  return choice;
}

std::unique_ptr<properties::SutStep> start_sut(const SutChoice& sut, std::int32_t jobs) {
  return std::make_unique<properties::SutStep>(sut.command, sut.timeout_seconds, jobs);
}

namespace {

void narrow_flag(std::string_view command, const std::string& text, const std::string& value,
                 std::optional<bool>& allowed) {
  if (value != "true" && value != "false") usage(command, "--restrict", shown(text) + ": expected true or false");
  const bool flag = value == "true";
  if (allowed && *allowed != flag) {
    usage(command, "--restrict", shown(text) + ": the SUT's handshake allows only " +
                                     (*allowed ? "true" : "false"));
  }
  allowed = flag;
}

void switch_off(std::string_view command, const std::string& text, const std::string& value,
                bool& allowed) {
  if (value != "false") usage(command, "--restrict", shown(text) + ": only false narrows this axis");
  allowed = false;
}

void narrow_limit(std::string_view command, const std::string& text, const std::string& value,
                  std::int32_t& limit) {
  const auto n = all_of(value, isdigit) ? parse_u64(value, 10) : std::nullopt;
  if (!n || *n == 0 || *n > 65536) usage(command, "--restrict", shown(text) + ": expected a number from 1 to 65536");
  limit = std::min(limit, static_cast<std::int32_t>(*n));
}

}  // namespace

void apply_restrict_option(std::string_view command, const std::string& text,
                           properties::Restriction& r) {
  const std::size_t equals = text.find('=');
  const std::string axis = text.substr(0, equals);
  const std::string value = equals == std::string::npos ? "" : text.substr(equals + 1);
  if (axis == "use_batch") return narrow_flag(command, text, value, r.use_batch);
  if (axis == "accumulation_normalize") return narrow_flag(command, text, value, r.accumulation_normalize);
  if (axis == "hard_negatives") return switch_off(command, text, value, r.hard_negatives);
  if (axis == "mask_fake_negative") return switch_off(command, text, value, r.mask_fake_negative);
  if (axis == "include_qq") return switch_off(command, text, value, r.include_qq);
  if (axis == "include_dd") return switch_off(command, text, value, r.include_dd);
  if (axis == "max_world") return narrow_limit(command, text, value, r.max_world);
  if (axis == "max_replicas") return narrow_limit(command, text, value, r.max_replicas);
  if (axis == "min_dim") {
    std::int32_t at_most = 4096;
    narrow_limit(command, text, value, at_most);
    r.min_dim = std::max(r.min_dim, at_most);
    return;
  }
  usage(command, "--restrict",
        shown(text) + " is not AXIS=VALUE with AXIS one of use_batch, accumulation_normalize, "
                      "hard_negatives, mask_fake_negative, include_qq, include_dd, max_world, "
                      "max_replicas, min_dim");
}

}  // namespace infonce::cli
