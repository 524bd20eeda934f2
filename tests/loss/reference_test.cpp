// (g) The full-batch reference of SPEC section 4: GA normalisation, the
// use_batch = false objective (mean of shard means), padding streams; and the
// real trainer's own single-process reference values (corpus/real-trainer).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "loss/reference.hpp"
#include "support.hpp"

namespace infonce::loss::testing {
namespace {

// Hand examples: F = D = 1, W = [[1]], no normalisation, T = 1, so E = X and
// every logit is W^2 x_q x_d. For one group with similarities s (target 0):
//   CE = log sum_j e^{s_j} - s_0,  dCE/dW = 2W sum_j (softmax_j - [j = 0]) s_j.
//   group A = (q, p, n) = (1, 2, 0): s = [2, 0]
//     CE_A = log(1 + e^-2) = 0.1269280110429726, dCE_A/dW = 4(s2 - 1), s2 = 1 / (1 + e^-2)
//   group B = (1, 1, 0): s = [1, 0]
//     CE_B = log(1 + e^-1) = 0.31326168751822286, dCE_B/dW = 2(s1 - 1), s1 = e / (e + 1)
//   group C = (1, 1): s = [1], CE_C = 0, no gradient.
ShardBatch shard(std::vector<std::vector<double>> groups) {
  ShardBatch batch;
  std::vector<double> values;
  for (const auto& g : groups) {
    batch.negative_counts.push_back(static_cast<std::int32_t>(g.size()) - 2);
    values.insert(values.end(), g.begin(), g.end());
  }
  batch.features.resize(static_cast<Eigen::Index>(values.size()), 1);
  for (std::size_t i = 0; i < values.size(); ++i)
    batch.features(static_cast<Eigen::Index>(i), 0) = values[i];
  return batch;
}

const std::vector<double> kGroupA{1, 2, 0};
const std::vector<double> kGroupB{1, 1, 0};
const std::vector<double> kGroupC{1, 1};

ReferenceProblem hand_problem(bool use_batch) {
  ReferenceProblem problem;
  problem.settings.temperature = 1.0;
  problem.settings.use_batch = use_batch;
  problem.weight = Matrix<double>::Ones(1, 1);
  problem.normalize = false;
  return problem;
}

// Two micro-steps, one shard: micro 0 holds group A, micro 1 group B.
//   normalize on:  L = (CE_A + CE_B) / 2 = 0.22009484928059775,
//                  dW = (4(s2-1) + 2(s1-1)) / 2 = -0.5073472654142305
//   normalize off: L = CE_A + CE_B = 0.4401896985611955, dW = -1.014694530828461
TEST(Reference, AccumulationNormalisationDividesByA) {
  ReferenceProblem problem = hand_problem(true);
  problem.micro_batches = {{shard({kGroupA})}, {shard({kGroupB})}};
  GeneratedPadding padding({0});
  problem.accumulation_normalize = true;
  const auto on = compute_reference<double>(problem, padding);
  EXPECT_NEAR(on.loss, 0.22009484928059775, 1e-15);
  EXPECT_NEAR(on.grad(0, 0), -0.5073472654142305, 1e-15);
  problem.accumulation_normalize = false;
  const auto off = compute_reference<double>(problem, padding);
  EXPECT_NEAR(off.loss, 0.4401896985611955, 1e-15);
  EXPECT_NEAR(off.grad(0, 0), -1.014694530828461, 1e-15);
}

// use_batch: one micro-step, shard 0 = group A, shard 1 = group B; the loss sees the union.
//   docs = [2 0 1 0] (q = 1 for both), row 0 target 0 (s = 2), row 1 target 2 (s = 1).
//   Z = e^2 + e + 2; L = ((log Z - 2) + (log Z - 1)) / 2 = 0.9938117090722387
//   dW = 2W (1/2) sum_rows (sum_j softmax_j s_j - s_t) = 2 (2e^2 + e) / Z - 3 =
//   -0.10978678694689492
TEST(Reference, UseBatchTakesTheUnionOfShards) {
  ReferenceProblem problem = hand_problem(true);
  problem.micro_batches = {{shard({kGroupA}), shard({kGroupB})}};
  GeneratedPadding padding({0});
  const auto result = compute_reference<double>(problem, padding);
  EXPECT_NEAR(result.loss, 0.9938117090722387, 1e-15);
  EXPECT_NEAR(result.grad(0, 0), -0.10978678694689492, 1e-15);
  EXPECT_EQ(result.shard_losses, (std::vector<double>{result.loss, result.loss}));
}

// use_batch = false, shard 0 = [A], shard 1 = [C, B]: unequal group counts.
//   shard means: CE_A = 0.1269280110429726, (CE_C + CE_B) / 2 = 0.15663084375911143
//   objective (mean of shard means) = 0.14177942740104202,
//   dW = 1/2 4(s2-1) + 1/4 2(s1-1) = -0.3728765547292329
//   whereas the global per-group mean (CE_A + CE_C + CE_B) / 3 = 0.1467298995203985.
//   Under a summing reduction: 0.28355885480208404, dW = 4(s2-1) + 1/2 2(s1-1) =
//   -0.7457531094584658.
TEST(Reference, WithoutUseBatchTheObjectiveIsTheMeanOfShardMeans) {
  ReferenceProblem problem = hand_problem(false);
  problem.micro_batches = {{shard({kGroupA}), shard({kGroupC, kGroupB})}};
  GeneratedPadding padding({0, 0});
  const auto mean = compute_reference<double>(problem, padding);
  EXPECT_NEAR(mean.loss, 0.14177942740104202, 1e-15);
  EXPECT_GT(std::fabs(mean.loss - 0.1467298995203985), 4e-3);  // not the global per-group mean
  EXPECT_NEAR(mean.grad(0, 0), -0.3728765547292329, 1e-15);
  ASSERT_EQ(mean.shard_losses.size(), 2u);
  EXPECT_NEAR(mean.shard_losses[0], 0.1269280110429726, 1e-15);
  EXPECT_NEAR(mean.shard_losses[1], 0.15663084375911143, 1e-15);

  problem.sum_over_shards = true;
  const auto sum = compute_reference<double>(problem, padding);
  EXPECT_NEAR(sum.loss, 0.28355885480208404, 1e-15);
  EXPECT_NEAR(sum.grad(0, 0), -0.7457531094584658, 1e-15);

  // With equal group counts the two definitions agree: [A] and [B] give (CE_A + CE_B) / 2.
  problem.sum_over_shards = false;
  problem.micro_batches = {{shard({kGroupA}), shard({kGroupB})}};
  EXPECT_NEAR(compute_reference<double>(problem, padding).loss, 0.22009484928059775, 1e-15);
}

// Records which (micro, stream) the reference asks for.
class RecordingPlan final : public PaddingPlan {
 public:
  PaddingDrawSource& source(std::int32_t micro, std::int32_t stream) override {
    requests.emplace_back(micro, stream);
    return draws_;
  }
  std::vector<std::pair<std::int32_t, std::int32_t>> requests;

 private:
  class Zero final : public PaddingDrawSource {
   public:
    std::int32_t draw(std::int32_t) override { return 0; }
  } draws_;
};

TEST(Reference, PaddingStreamsAreZeroWithUseBatchAndTheShardWithout) {
  using Requests = std::vector<std::pair<std::int32_t, std::int32_t>>;
  for (const bool use_batch : {true, false}) {
    ReferenceProblem problem = hand_problem(use_batch);
    problem.settings.hard_negatives = 2;
    problem.micro_batches = {{shard({kGroupA}), shard({kGroupB})},
                             {shard({kGroupB}), shard({kGroupA})}};
    RecordingPlan plan;
    compute_reference<double>(problem, plan);
    const Requests expected =
        use_batch ? Requests{{0, 0}, {1, 0}} : Requests{{0, 0}, {0, 1}, {1, 0}, {1, 1}};
    EXPECT_EQ(plan.requests, expected);
  }
  // Without hard_negatives no source is requested at all.
  ReferenceProblem problem = hand_problem(true);
  problem.micro_batches = {{shard({kGroupA})}};
  RecordingPlan plan;
  compute_reference<double>(problem, plan);
  EXPECT_TRUE(plan.requests.empty());
}

TEST(Reference, RejectsMalformedProblems) {
  GeneratedPadding padding({0, 0});
  const auto expect_error = [&](const ReferenceProblem& p, const std::string& fragment) {
    try {
      compute_reference<double>(p, padding);
      ADD_FAILURE() << "expected InputError containing " << fragment;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  ReferenceProblem p = hand_problem(true);
  expect_error(p, "micro_batches: need at least one micro-step");
  p.micro_batches = {{shard({kGroupA})}, {shard({kGroupA}), shard({kGroupB})}};
  expect_error(p, "micro_batches[1]: has 2 shards, micro-step 0 has 1");
  ShardBatch bad = shard({kGroupA});
  bad.negative_counts = {2};
  p.micro_batches = {{bad}};
  expect_error(p, "micro_batches[0][0]: features have 3 rows, the groups need 4");
  p.micro_batches = {{ShardBatch{Matrix<double>(0, 1), {}}}};
  expect_error(p, "the loss needs at least one group");
  ReferenceProblem local = hand_problem(false);
  local.micro_batches = {{shard({kGroupA}), ShardBatch{Matrix<double>(0, 1), {}}}};
  expect_error(local, "micro_batches[0][1]: a shard with no groups has no loss");
  // Under use_batch an empty shard is fine while others have groups.
  ReferenceProblem batch = hand_problem(true);
  batch.micro_batches = {{shard({kGroupA}), ShardBatch{Matrix<double>(0, 1), {}}}};
  EXPECT_NEAR(compute_reference<double>(batch, padding).loss, 0.1269280110429726, 1e-15);
}

TEST(Reference, FloatAgreesWithDouble) {
  Rng rng(99);
  ReferenceProblem problem;
  problem.settings.include_qq = true;
  problem.settings.hard_negatives = 2;
  problem.weight = random_matrix(rng, 4, 3, 1.0);
  for (int m = 0; m < 2; ++m) {
    std::vector<ShardBatch> shards;
    for (int d = 0; d < 2; ++d) {
      ShardBatch b;
      b.negative_counts = {1, 3};
      b.features = random_matrix(rng, 8, 3, 1.0);
      shards.push_back(b);
    }
    problem.micro_batches.push_back(shards);
  }
  GeneratedPadding pd({5}), pf({5});
  const auto d = compute_reference<double>(problem, pd);
  const auto f = compute_reference<float>(problem, pf);
  EXPECT_LE(scalar_relative_error(f.loss, d.loss), 1e-5);
  EXPECT_LE(relative_error(f.grad, d.grad), 1e-5);
}

// ---- the real trainer's reference values ----

std::filesystem::path corpus_dir() {
  return std::filesystem::path(INFONCE_SOURCE_DIR) / "corpus" /
         "real-trainer";
}

nlohmann::json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

Matrix<double> matrix_of(const nlohmann::json& rows) {
  Matrix<double> m(static_cast<Eigen::Index>(rows.size()),
                   rows.empty() ? 0 : static_cast<Eigen::Index>(rows[0].size()));
  for (std::size_t i = 0; i < rows.size(); ++i) {
    for (std::size_t j = 0; j < rows[i].size(); ++j) {
      m(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j)) = rows[i][j].get<double>();
    }
  }
  return m;
}

// Reads the parts of an `infonce-case/1` file the reference needs (the
// casefile layer is the real reader; this one is deliberately minimal).
struct CorpusCase {
  ReferenceProblem problem;
  std::unique_ptr<PaddingPlan> padding;
  nlohmann::json expect;
};

CorpusCase read_case(const std::filesystem::path& path) {
  const nlohmann::json j = read_json(path);
  CorpusCase c;
  const auto& loss = j.at("loss");
  LossSettings& s = c.problem.settings;
  s.temperature = loss.at("temperature").get<double>();
  s.use_batch = loss.at("use_batch").get<bool>();
  if (!loss.at("hard_negatives").is_null()) s.hard_negatives = loss.at("hard_negatives").get<int>();
  s.padding = loss.at("padding").get<std::string>() == "fixed" ? Padding::fixed : Padding::legacy;
  s.mask_fake_negative = loss.at("mask_fake_negative").get<bool>();
  s.fake_neg_margin = loss.at("fake_neg_margin").get<double>();
  s.include_qq = loss.at("include_qq").get<bool>();
  s.include_dd = loss.at("include_dd").get<bool>();
  c.problem.weight = matrix_of(j.at("encoder").at("weight"));
  c.problem.normalize = j.at("encoder").at("normalize").get<bool>();
  c.problem.accumulation_normalize = j.at("accumulation").at("normalize").get<bool>();
  c.problem.sum_over_shards = j.at("reduction").get<std::string>() == "sum" && !s.use_batch;
  for (const auto& micro : j.at("batches")) {
    std::vector<ShardBatch> shards;
    for (const auto& rank : micro) {
      ShardBatch batch;
      nlohmann::json rows = nlohmann::json::array();
      for (const auto& group : rank) {
        batch.negative_counts.push_back(static_cast<std::int32_t>(group.size()) - 2);
        for (const auto& row : group) rows.push_back(row);
      }
      batch.features = matrix_of(rows);
      if (rows.empty()) batch.features.resize(0, c.problem.weight.cols());
      shards.push_back(batch);
    }
    c.problem.micro_batches.push_back(shards);
  }
  if (j.contains("padding_draws")) {
    c.padding = std::make_unique<RecordedPadding>(j.at("padding_draws").get<RecordedDraws>());
  } else {
    c.padding = std::make_unique<GeneratedPadding>(std::vector<std::uint64_t>(
        c.problem.micro_batches.front().size(), j.at("rng").at("seed").get<std::uint64_t>()));
  }
  c.expect = j.at("expect");
  return c;
}

// ref/NAME.json: the trainer's single-process reference for cases/NAME-fixed.json;
// the fixed case's `expect`: what real DDP produced with the fix (rank 0's loss).
TEST(Reference, ReproducesTheRealTrainersReference) {
  const std::filesystem::path dir = corpus_dir();
  ASSERT_TRUE(std::filesystem::exists(dir / "ref")) << dir;
  std::vector<std::filesystem::path> refs;
  for (const auto& entry : std::filesystem::directory_iterator(dir / "ref"))
    refs.push_back(entry.path());
  std::sort(refs.begin(), refs.end());
  double worst_ref = 0;
  double worst_expect = 0;
  std::string worst_name;
  for (const auto& ref_path : refs) {
    const std::string name = ref_path.stem().string();
    const nlohmann::json ref = read_json(ref_path);
    CorpusCase c = read_case(dir / "cases" / (name + "-fixed.json"));
    const auto result = compute_reference<double>(c.problem, *c.padding);
    const double loss_error = scalar_relative_error(result.loss, ref.at("ref_loss").get<double>());
    const double grad_error = relative_error(result.grad, matrix_of(ref.at("ref_grad")));
    EXPECT_LE(loss_error, 1e-10) << name;
    EXPECT_LE(grad_error, 1e-10) << name;
    if (std::max(loss_error, grad_error) > worst_ref) {
      worst_ref = std::max(loss_error, grad_error);
      worst_name = name;
    }
    // Rank 0 holds DP shard 0 and reports its loss; DDP's averaged gradient is the objective's.
    const double expect_error =
        std::max(scalar_relative_error(result.shard_losses[0], c.expect.at("loss").get<double>()),
                 relative_error(result.grad, matrix_of(c.expect.at("grad"))));
    EXPECT_LE(expect_error, 1e-10) << name << " expect";
    worst_expect = std::max(worst_expect, expect_error);
  }
  std::printf("real trainer: %zu references, max rel err %.3e (%s); vs DDP expect %.3e\n",
              refs.size(), worst_ref, worst_name.c_str(), worst_expect);
  EXPECT_GE(refs.size(), 40u);
}

}  // namespace
}  // namespace infonce::loss::testing
