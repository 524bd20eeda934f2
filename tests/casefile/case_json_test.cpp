// Reading and writing infonce-case/1: the real-trainer corpus, field values,
// canonical output, bit-exact round trips, and the malformed-input table.
#include <algorithm>
#include <bit>
#include <cmath>
#include <filesystem>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/error.hpp"
#include "base/rng.hpp"
#include "casefile/case.hpp"
#include "casefile/case_json.hpp"
#include "tests/casefile/bad_case_table.hpp"

namespace infonce {
namespace {

namespace fs = std::filesystem;
using testing::bad_cases;
using testing::kValidCaseText;

const fs::path kRepo = INFONCE_SOURCE_DIR;  // not __FILE__: relative under Ninja

std::vector<fs::path> corpus_files() {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(kRepo / "corpus/real-trainer/cases")) {
    files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// --- bit-exact comparison of two cases

void expect_same_bits(double a, double b, const std::string& where) {
  EXPECT_EQ(std::bit_cast<std::uint64_t>(a), std::bit_cast<std::uint64_t>(b))
      << where << ": " << a << " vs " << b;
}

void expect_same_matrix(const Matrix<double>& a, const Matrix<double>& b,
                        const std::string& where) {
  ASSERT_EQ(a.rows(), b.rows()) << where;
  ASSERT_EQ(a.cols(), b.cols()) << where;
  for (Eigen::Index r = 0; r < a.rows(); ++r) {
    for (Eigen::Index j = 0; j < a.cols(); ++j) {
      expect_same_bits(a(r, j), b(r, j),
                       where + "[" + std::to_string(r) + "][" + std::to_string(j) + "]");
    }
  }
}

void expect_same_case(const Case& a, const Case& b) {
  EXPECT_EQ(a.mesh.world, b.mesh.world);
  EXPECT_EQ(a.mesh.dp, b.mesh.dp);
  EXPECT_EQ(a.reduction, b.reduction);
  EXPECT_EQ(a.gather, b.gather);
  EXPECT_EQ(a.compensate, b.compensate);
  expect_same_bits(a.loss.temperature, b.loss.temperature, "loss.temperature");
  EXPECT_EQ(a.loss.use_batch, b.loss.use_batch);
  EXPECT_EQ(a.loss.hard_negatives, b.loss.hard_negatives);
  EXPECT_EQ(a.loss.padding, b.loss.padding);
  EXPECT_EQ(a.loss.mask_fake_negative, b.loss.mask_fake_negative);
  expect_same_bits(a.loss.fake_neg_margin, b.loss.fake_neg_margin, "loss.fake_neg_margin");
  EXPECT_EQ(a.loss.include_qq, b.loss.include_qq);
  EXPECT_EQ(a.loss.include_dd, b.loss.include_dd);
  EXPECT_EQ(a.encoder_normalize, b.encoder_normalize);
  expect_same_matrix(a.weight, b.weight, "encoder.weight");
  EXPECT_EQ(a.accumulation_steps, b.accumulation_steps);
  EXPECT_EQ(a.accumulation_normalize, b.accumulation_normalize);
  EXPECT_EQ(a.rng_mode, b.rng_mode);
  EXPECT_EQ(a.rng_seed, b.rng_seed);
  EXPECT_EQ(a.padding_draws, b.padding_draws);
  EXPECT_EQ(a.scalar, b.scalar);
  ASSERT_EQ(a.batches.size(), b.batches.size());
  for (std::size_t m = 0; m < a.batches.size(); ++m) {
    ASSERT_EQ(a.batches[m].size(), b.batches[m].size());
    for (std::size_t d = 0; d < a.batches[m].size(); ++d) {
      const std::string where = "batches[" + std::to_string(m) + "][" + std::to_string(d) + "]";
      EXPECT_EQ(a.batches[m][d].negative_counts, b.batches[m][d].negative_counts) << where;
      expect_same_matrix(a.batches[m][d].features, b.batches[m][d].features, where);
    }
  }
  ASSERT_EQ(a.expect.has_value(), b.expect.has_value());
  if (a.expect) {
    expect_same_bits(a.expect->loss, b.expect->loss, "expect.loss");
    expect_same_matrix(a.expect->grad, b.expect->grad, "expect.grad");
    expect_same_bits(a.expect->rtol, b.expect->rtol, "expect.rtol");
    expect_same_bits(a.expect->atol, b.expect->atol, "expect.atol");
  }
}

// parse(write(c)) == c bit for bit, and writing again gives the same bytes.
void expect_round_trip(const Case& c) {
  const std::string written = case_to_json(c);
  const Case read_back = parse_case(written);
  expect_same_case(c, read_back);
  EXPECT_EQ(case_to_json(read_back), written);
}

// --- the real trainer's cases

TEST(CaseJson, ReadsEveryRealTrainerCase) {
  const auto files = corpus_files();
  ASSERT_EQ(files.size(), 80u);
  for (const fs::path& file : files) {
    SCOPED_TRACE(file.string());
    const Case c = read_case_file(file);
    EXPECT_TRUE(c.expect.has_value());
    EXPECT_EQ(c.compensate, file.string().ends_with("-fixed.json"));
  }
}

TEST(CaseJson, ReadsTheFieldsOfOneRealTrainerCase) {
  // Values copied from corpus/real-trainer/cases/w2d2-000-fixed.json.
  const Case c = read_case_file(kRepo / "corpus/real-trainer/cases/w2d2-000-fixed.json");
  EXPECT_EQ(c.mesh.world, 2);
  EXPECT_EQ(c.mesh.dp, 2);
  EXPECT_EQ(c.reduction, Reduction::mean);
  EXPECT_EQ(c.gather, GatherPath::object);
  EXPECT_TRUE(c.compensate);
  EXPECT_EQ(c.loss.temperature, 1.0);
  EXPECT_TRUE(c.loss.use_batch);
  EXPECT_FALSE(c.loss.hard_negatives.has_value());
  EXPECT_EQ(c.loss.padding, loss::Padding::legacy);
  EXPECT_EQ(c.loss.fake_neg_margin, 0.3);
  EXPECT_FALSE(c.loss.include_qq);
  EXPECT_TRUE(c.loss.include_dd);
  EXPECT_TRUE(c.encoder_normalize);
  ASSERT_EQ(c.weight.rows(), 3);
  ASSERT_EQ(c.weight.cols(), 6);
  EXPECT_EQ(c.weight(0, 0), 0.819777850253236);
  EXPECT_EQ(c.weight(2, 5), 0.6501648298871726);
  EXPECT_EQ(c.accumulation_steps, 2);
  EXPECT_TRUE(c.accumulation_normalize);
  EXPECT_EQ(c.rng_mode, RngMode::synced);
  EXPECT_EQ(c.rng_seed, 264491190u);
  EXPECT_FALSE(c.padding_draws.has_value());
  EXPECT_EQ(c.scalar, ScalarType::float64);
  ASSERT_EQ(c.batches.size(), 2u);
  ASSERT_EQ(c.batches[0].size(), 2u);
  EXPECT_EQ(c.batches[0][0].features(0, 0), 0.1505004374104937);
  EXPECT_EQ(c.batches[0][0].features(1, 0), -0.6609668917092785);
}

TEST(CaseJson, ReadsRecordedPaddingDraws) {
  // corpus/real-trainer/cases/w2d2-006-fixed.json: "padding_draws": [[[1, 1], [0, 0, 0, 0]]],
  // groups of 2, 2 negatives (shard 0) and 1, 1, 3 (shard 1), hard_negatives 3.
  const Case c = read_case_file(kRepo / "corpus/real-trainer/cases/w2d2-006-fixed.json");
  ASSERT_TRUE(c.padding_draws.has_value());
  const loss::RecordedDraws expected{{{1, 1}, {0, 0, 0, 0}}};
  EXPECT_EQ(*c.padding_draws, expected);
  EXPECT_EQ(c.loss.hard_negatives, 3);
  EXPECT_EQ(c.batches[0][0].negative_counts, (std::vector<std::int32_t>{2, 2}));
  EXPECT_EQ(c.batches[0][1].negative_counts, (std::vector<std::int32_t>{1, 1, 3}));
  EXPECT_EQ(c.batches[0][1].features.rows(), 3 + 3 + 5);
}

TEST(CaseJson, RealTrainerCasesRoundTripBitForBit) {
  for (const fs::path& file : corpus_files()) {
    SCOPED_TRACE(file.string());
    expect_round_trip(read_case_file(file));
  }
}

// --- the small valid case of the bad-input table

TEST(CaseJson, ReadsTheValidTableCase) {
  const Case c = parse_case(kValidCaseText);
  EXPECT_EQ(c.mesh.replicas(), 2);
  EXPECT_EQ(c.loss.hard_negatives, 2);
  EXPECT_EQ(c.loss.padding, loss::Padding::fixed);
  // Group rows [q, p, n...] stack into one matrix per shard; k = rows - 2.
  EXPECT_EQ(c.batches[0][0].negative_counts, (std::vector<std::int32_t>{1}));
  EXPECT_EQ(c.batches[0][1].negative_counts, (std::vector<std::int32_t>{2}));
  ASSERT_EQ(c.batches[0][1].features.rows(), 4);
  EXPECT_EQ(c.batches[0][1].features(3, 0), 2.0);
  EXPECT_EQ(c.batches[0][0].features(1, 0), 0.25);
  ASSERT_TRUE(c.expect.has_value());
  EXPECT_EQ(c.expect->rtol, 1e-10);
  EXPECT_EQ(c.expect->atol, 1e-12);
}

TEST(CaseJson, WritesCanonicalText) {
  // Hand-written: SPEC key order, one group per line, doubles in shortest
  // round-trip form (integers in the input become 1.0 etc.).
  const std::string expected = R"({
  "format": "infonce-case/1",
  "mesh": {"world":4,"dp":2},
  "reduction": "mean",
  "gather": "object",
  "compensate": true,
  "loss": {"temperature":0.1,"use_batch":true,"hard_negatives":2,"padding":"fixed","mask_fake_negative":false,"fake_neg_margin":0.1,"include_qq":false,"include_dd":false},
  "encoder": {"normalize":true,"weight":[[1.0,0.0,0.5],[0.0,1.0,-0.5]]},
  "accumulation": {"steps":2,"normalize":true},
  "rng": {"mode":"synced","seed":7},
  "padding_draws": [
    [[0],[0]],
    [[],[]]
  ],
  "batches": [
    [
      [
        [[1.0,2.0,3.0],[0.25,1.0,0.0],[1.0,1.0,1.0]]
      ],
      [
        [[0.0,1.0,0.0],[1.0,0.0,0.0],[0.0,0.0,1.0],[2.0,2.0,2.0]]
      ]
    ],
    [
      [
        [[1.0,0.0,0.0],[0.0,1.0,0.0],[0.0,0.0,1.0],[1.0,1.0,0.0]]
      ],
      [
        [[3.0,2.0,1.0],[1.0,2.0,3.0],[0.0,1.0,1.0],[1.0,0.0,1.0]]
      ]
    ]
  ],
  "expect": {"loss":0.5,"grad":[[0.0,0.0,0.0],[0.0,0.0,0.0]],"rtol":1e-10,"atol":1e-12}
}
)";
  EXPECT_EQ(case_to_json(parse_case(kValidCaseText)), expected);
}

TEST(CaseJson, ExtremeValuesRoundTripBitForBit) {
  Case c = parse_case(kValidCaseText);
  c.reduction = Reduction::sum;
  c.gather = GatherPath::tensor;
  c.compensate = false;
  c.rng_mode = RngMode::per_rank;
  c.rng_seed = std::numeric_limits<std::uint64_t>::max();
  c.scalar = ScalarType::float32;
  c.loss.temperature = std::numeric_limits<double>::denorm_min();
  c.loss.fake_neg_margin = -0.0;
  c.loss.padding = loss::Padding::legacy;
  c.loss.mask_fake_negative = c.loss.include_qq = c.loss.include_dd = true;
  c.weight << -0.0, std::numeric_limits<double>::denorm_min(), std::numeric_limits<double>::max(),
      -std::numeric_limits<double>::min(), 1.0 / 3.0, std::numbers::pi;
  c.expect->loss = 0.1 + 0.2;  // 0.30000000000000004
  c.expect->grad(1, 2) = -std::numeric_limits<double>::epsilon();
  c.expect->rtol = 0;
  c.expect->atol = 1e-300;
  expect_round_trip(c);
}

TEST(CaseJson, RandomBitPatternsRoundTripBitForBit) {
  // Every finite double: random 64-bit patterns, non-finite ones skipped.
  Case c = parse_case(kValidCaseText);
  Rng rng(20260901);
  Matrix<double> weight(64, 64);
  for (Eigen::Index r = 0; r < weight.rows(); ++r) {
    for (Eigen::Index j = 0; j < weight.cols(); ++j) {
      double value;
      do value = std::bit_cast<double>(rng.next_u64());
      while (!std::isfinite(value));
      weight(r, j) = value;
    }
  }
  c.weight = weight;
  for (auto& micro : c.batches) {
    for (auto& shard : micro) {
      Matrix<double> features(shard.features.rows(), weight.cols());
      for (Eigen::Index i = 0; i < features.size(); ++i) features.data()[i] = rng.normal();
      shard.features = features;
    }
  }
  c.expect.reset();
  expect_round_trip(c);
}

// --- optional keys

TEST(CaseJson, OptionalKeysMayBeAbsentOrNull) {
  auto document = nlohmann::json::parse(kValidCaseText);
  document["expect"].erase("rtol");
  document["expect"].erase("atol");
  Case c = parse_case(document.dump());
  EXPECT_EQ(c.expect->rtol, 1e-10);  // the defaults of the SPEC's example
  EXPECT_EQ(c.expect->atol, 1e-12);

  document["padding_draws"] = nullptr;
  document["expect"] = nullptr;
  document["dtype"] = nullptr;
  c = parse_case(document.dump());
  EXPECT_FALSE(c.padding_draws.has_value());
  EXPECT_FALSE(c.expect.has_value());
  EXPECT_EQ(c.scalar, ScalarType::float64);

  document.erase("padding_draws");
  document.erase("expect");
  document["dtype"] = "float32";
  document["loss"]["hard_negatives"] = nullptr;
  c = parse_case(document.dump());
  EXPECT_EQ(c.scalar, ScalarType::float32);
  EXPECT_FALSE(c.loss.hard_negatives.has_value());
  // The writer leaves absent optional keys out and writes dtype only for float32.
  const std::string written = case_to_json(c);
  EXPECT_EQ(written.find("\"padding_draws\""), std::string::npos);
  EXPECT_EQ(written.find("\"expect\""), std::string::npos);
  EXPECT_NE(written.find("\"dtype\": \"float32\""), std::string::npos);
  EXPECT_NE(written.find("\"hard_negatives\":null"), std::string::npos);
}

TEST(CaseJson, StrategyKeyIsOptionalAndRoundTrips) {
  // Absent: no strategy, and the effective one is the trainer's (pattern A).
  const Case plain = parse_case(kValidCaseText);
  EXPECT_FALSE(plain.strategy.has_value());
  EXPECT_EQ(case_to_json(plain).find("\"strategy\""), std::string::npos);
  const Strategy trainer = effective_strategy(plain);
  EXPECT_EQ(trainer.gather, GatherKind::detached_own_live);
  EXPECT_EQ(trainer.scope, LossScope::global);
  EXPECT_EQ(trainer.scale, BackwardScale::dp_shards);
  EXPECT_EQ(trainer.reduction, Reduction::mean);

  auto document = nlohmann::json::parse(kValidCaseText);
  document["strategy"] = nullptr;
  EXPECT_FALSE(parse_case(document.dump()).strategy.has_value());
  document["strategy"] = {{"gather", "autograd"}, {"scope", "local"}, {"scale", "W"}};
  const Case given = parse_case(document.dump());
  ASSERT_TRUE(given.strategy.has_value());
  EXPECT_EQ(given.strategy->gather, GatherKind::autograd);
  EXPECT_EQ(given.strategy->scope, LossScope::local);
  EXPECT_EQ(given.strategy->scale, BackwardScale::world_size);
  EXPECT_EQ(given.strategy->reduction, Reduction::mean);  // the case's reduction
  EXPECT_EQ(effective_strategy(given), *given.strategy);
  const std::string written = case_to_json(given);
  EXPECT_NE(written.find(R"("strategy": {"gather":"autograd","scope":"local","scale":"W",)"
                         R"("reduction":"mean"})"),
            std::string::npos)
      << written;
  EXPECT_EQ(case_to_json(parse_case(written)), written);
}

// The gather's group (SPEC section 13): "group" is optional, dp when absent,
// and written only for world, so a dp case file is what it was.
TEST(CaseJson, StrategyGroupIsOptionalAndWrittenOnlyForWorld) {
  auto document = nlohmann::json::parse(kValidCaseText);
  document["strategy"] = {{"gather", "detached-own-live"}, {"scope", "global"}, {"scale", "W"}};
  const Case dp = parse_case(document.dump());
  ASSERT_TRUE(dp.strategy.has_value());
  EXPECT_EQ(dp.strategy->group, GatherGroup::dp);
  EXPECT_EQ(case_to_json(dp).find("\"group\""), std::string::npos);
  document["strategy"]["group"] = "dp";
  EXPECT_EQ(case_to_json(parse_case(document.dump())), case_to_json(dp));
  document["strategy"]["group"] = "world";
  const Case world = parse_case(document.dump());
  EXPECT_EQ(world.strategy->group, GatherGroup::world);
  const std::string written = case_to_json(world);
  EXPECT_NE(written.find(R"("reduction":"mean","group":"world"})"), std::string::npos) << written;
  EXPECT_EQ(case_to_json(parse_case(written)), written);
  document["strategy"]["group"] = "replicas";
  try {
    parse_case(document.dump());
    ADD_FAILURE() << "no error";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("strategy.group"), std::string::npos) << error.what();
  }
}

TEST(CaseJson, TrainerStrategyFollowsTheFixRule) {
  Case c = parse_case(kValidCaseText);
  c.reduction = Reduction::sum;
  EXPECT_EQ(effective_strategy(c).scale, BackwardScale::none);  // a summing reducer: no scale
  EXPECT_EQ(effective_strategy(c).reduction, Reduction::sum);
  c.reduction = Reduction::mean;
  c.loss.use_batch = false;
  EXPECT_EQ(effective_strategy(c).scale, BackwardScale::none);  // no gather: no scale
  c.loss.use_batch = true;
  c.compensate = false;
  EXPECT_EQ(effective_strategy(c).scale, BackwardScale::none);  // before the fix
}

TEST(CaseJson, IntegersReadAsNumbersAndKeyOrderIsFree) {
  // Keys in reverse order; every number written as an integer.
  auto document = nlohmann::json::parse(kValidCaseText);
  nlohmann::ordered_json reversed;
  std::vector<std::string> keys;
  for (const auto& [key, value] : document.items()) keys.push_back(key);
  std::reverse(keys.begin(), keys.end());
  for (const auto& key : keys) reversed[key] = document[key];
  reversed["loss"]["temperature"] = 1;
  const Case c = parse_case(reversed.dump());
  EXPECT_EQ(c.loss.temperature, 1.0);
  EXPECT_EQ(c.mesh.world, 4);
}

// --- files

TEST(CaseJson, FileErrorsNameTheFile) {
  const fs::path missing = fs::path(::testing::TempDir()) / "no-such-case.json";
  try {
    read_case_file(missing);
    ADD_FAILURE() << "no error";
  } catch (const InputError& error) {
    EXPECT_EQ(std::string(error.what()),
              missing.string() + ": cannot read: No such file or directory");
  }
  try {
    read_case_file(::testing::TempDir());
    ADD_FAILURE() << "no error";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("is a directory"), std::string::npos);
  }
}

TEST(CaseJson, WriteThenReadAFile) {
  const fs::path path = fs::path(::testing::TempDir()) / "infonce-case-json-test.json";
  const Case c = parse_case(kValidCaseText);
  write_case_file(c, path);
  expect_same_case(c, read_case_file(path));
  try {
    fs::path bad = path;
    bad += ".broken";
    {
      std::string text(kValidCaseText);
      text.replace(text.find("\"dp\":2"), 6, "\"dp\":3");
      std::FILE* file = std::fopen(bad.c_str(), "wb");
      ASSERT_NE(file, nullptr);
      std::fwrite(text.data(), 1, text.size(), file);
      std::fclose(file);
    }
    read_case_file(bad);
    ADD_FAILURE() << "no error";
  } catch (const InputError& error) {
    // The file name, then the key.
    EXPECT_EQ(std::string(error.what()),
              path.string() + ".broken: mesh.dp: 3 does not divide mesh.world = 4");
  }
}

// --- the malformed-input table

TEST(CaseJson, BadCaseTableNamesAreUnique) {
  const auto table = bad_cases();
  EXPECT_GE(table.size(), 50u);
  std::vector<std::string> names;
  for (const auto& bad : table) names.push_back(bad.name);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(std::adjacent_find(names.begin(), names.end()), names.end());
}

TEST(CaseJson, EveryBadCaseIsRejectedWithAOneLineMessageNamingTheKey) {
  for (const auto& bad : bad_cases()) {
    SCOPED_TRACE(bad.name);
    try {
      parse_case(bad.text);
      ADD_FAILURE() << bad.name << ": accepted";
    } catch (const InputError& error) {
      const std::string message = error.what();
      EXPECT_TRUE(message.starts_with(bad.path + ": ")) << message;
      EXPECT_NE(message.find(bad.detail), std::string::npos) << message;
      EXPECT_EQ(message.find_first_of("\n\r"), std::string::npos) << message;
    }
  }
}

}  // namespace
}  // namespace infonce

namespace infonce {
namespace {

// Deterministic corruption of a valid file (byte changes, cuts, splices):
// every outcome is a case or an InputError with a one-line message, never
// another exception or a crash.
TEST(CaseJson, CorruptedFilesGiveACaseOrAnInputError) {
  const std::string valid(kValidCaseText);
  const std::string alphabet = "{}[],:\"0123456789.-+eE \ntrufalsn\\x";
  Rng rng(7);
  int rejected = 0;
  for (int trial = 0; trial < 5000; ++trial) {
    std::string text = valid;
    const auto edits = rng.between(1, 4);
    for (std::int64_t e = 0; e < edits && !text.empty(); ++e) {
      const auto at = static_cast<std::size_t>(rng.below(text.size()));
      switch (rng.below(4)) {
        case 0:  // replace a byte
          text[at] = alphabet[rng.below(alphabet.size())];
          break;
        case 1:  // delete a run
          text.erase(at, static_cast<std::size_t>(rng.between(1, 8)));
          break;
        case 2:  // duplicate a run elsewhere
          text.insert(static_cast<std::size_t>(rng.below(text.size())),
                      text.substr(at, static_cast<std::size_t>(rng.between(1, 16))));
          break;
        default:  // cut the file
          text.resize(at);
          break;
      }
    }
    try {
      parse_case(text);
    } catch (const InputError& error) {
      ++rejected;
      EXPECT_EQ(std::string(error.what()).find_first_of("\n\r"), std::string::npos) << text;
    }
  }
  EXPECT_GT(rejected, 4000);  // almost every corruption breaks the file
}

}  // namespace
}  // namespace infonce
