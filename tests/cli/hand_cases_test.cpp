// Tiny cases whose reference is worked out by hand below, checked through
// `infonce-sim reference --case FILE --json`. Every case uses T = 1 and no
// normalisation, so a logit is the plain dot product of two embeddings e = W x.
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <numbers>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/cli/cli_runner.hpp"

namespace infonce::cli_test {
namespace {

using Json = nlohmann::json;
constexpr double kE = std::numbers::e;

struct Reference {
  double loss;
  std::vector<double> shard_losses;  // empty when use_batch
  std::vector<std::vector<double>> grad;
};

// |a - b| <= 1e-13 |b| + 1e-15: a few ulps of summation-order difference.
void expect_close(double actual, double expected, const std::string& what) {
  EXPECT_LE(std::abs(actual - expected), 1e-13 * std::abs(expected) + 1e-15)
      << what << ": " << actual << " vs " << expected;
}

Json reference_of(const std::string& name, const std::string& case_text,
                  const std::vector<std::string>& extra_args = {"--json"}) {
  const auto dir = fresh_work_dir("hand-" + name);
  const auto file = write_text_file(dir / (name + ".json"), case_text);
  std::vector<std::string> args{"reference", "--case", file.string()};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  const CliResult result = run_infonce_sim(args);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.err, "");
  return Json::parse(result.out);
}

void expect_reference(const Json& got, const Reference& expected) {
  expect_close(got.at("loss").get<double>(), expected.loss, "loss");
  if (expected.shard_losses.empty()) {
    EXPECT_FALSE(got.contains("shard_losses"));
  } else {
    ASSERT_EQ(got.at("shard_losses").size(), expected.shard_losses.size());
    for (std::size_t d = 0; d < expected.shard_losses.size(); ++d) {
      expect_close(got["shard_losses"][d].get<double>(), expected.shard_losses[d],
                   "shard_losses[" + std::to_string(d) + "]");
    }
  }
  ASSERT_EQ(got.at("grad").size(), expected.grad.size());
  for (std::size_t r = 0; r < expected.grad.size(); ++r) {
    ASSERT_EQ(got["grad"][r].size(), expected.grad[r].size());
    for (std::size_t j = 0; j < expected.grad[r].size(); ++j) {
      expect_close(got["grad"][r][j].get<double>(), expected.grad[r][j],
                   "grad[" + std::to_string(r) + "][" + std::to_string(j) + "]");
    }
  }
}

std::string case_text(const std::string& mesh, bool use_batch, const std::string& hard_negatives,
                      const std::string& padding, const std::string& weight, int steps,
                      const std::string& reduction, const std::string& extra) {
  return R"({"format":"infonce-case/1","mesh":)" + mesh + R"(,"reduction":")" + reduction +
         R"(","gather":"object","compensate":true,"loss":{"temperature":1.0,"use_batch":)" +
         (use_batch ? "true" : "false") + R"(,"hard_negatives":)" + hard_negatives +
         R"(,"padding":")" + padding +
         R"(","mask_fake_negative":false,"fake_neg_margin":0.1,"include_qq":false,)"
         R"("include_dd":false},"encoder":{"normalize":false,"weight":)" +
         weight + R"(},"accumulation":{"steps":)" + std::to_string(steps) +
         R"(,"normalize":true},"rng":{"mode":"synced","seed":0},)" + extra + "}";
}

// Case A: one rank, one group, no cross-rank negatives. W = I (2 x 2),
// q = (1, 0), p = (1, 0), n = (0, 1).
//   logits l = (q.p, q.n) = (1, 0), target 0
//   loss = -log(e / (e + 1)) = log(1 + e^-1)
//   dL/dl = softmax(l) - onehot = (-a, a) with a = 1 / (1 + e)
//   dL/dq = -a p + a n = (-a, a);  dL/dp = -a q = (-a, 0);  dL/dn = a q = (a, 0)
//   dL/dW = sum_i dL/de_i x_i^T:
//     q: (-a, a) x (1, 0) -> [[-a, 0], [a, 0]]
//     p: (-a, 0) x (1, 0) -> [[-a, 0], [0, 0]]
//     n: ( a, 0) x (0, 1) -> [[ 0, a], [0, 0]]
//   grad = [[-2a, a], [a, 0]]; the one shard's loss is the loss.
TEST(HandCase, OneGroupOneNegative) {
  const std::string text =
      case_text(R"({"world":1,"dp":1})", false, "null", "fixed", "[[1,0],[0,1]]", 1, "mean",
                R"("batches":[[[[[1,0],[1,0],[0,1]]]]])");
  const double a = 1 / (1 + kE);
  const double loss = std::log(1 + 1 / kE);
  expect_reference(reference_of("a", text), {loss, {loss}, {{-2 * a, a}, {a, 0}}});
}

// Case B: negatives cross DP shards (use_batch). D = F = 1, W = (w), w = 1.
// Shard 0 holds the group (q0 = 1, p0 = 2), shard 1 the group (q1 = 1, p1 = -1);
// no negatives of their own. docs = (p0, p1); with s = w^2 every logit is s x_q x_d:
//   group 0: l = s (2, -1), target 0: loss0 = log(1 + e^-3s)
//   group 1: l = s (2, -1), target 1: loss1 = s + log(e^2s + e^-s) = 3s + log(1 + e^-3s)
//   L = (loss0 + loss1) / 2 = 1.5 s + log(1 + e^-3s)            -> at w = 1: 1.5 + log(1 + e^-3)
//   dL/dw = 2w (1.5 - 3 e^-3s / (1 + e^-3s)) = 2w (1.5 - 3 / (1 + e^3s)) -> 3 - 6 / (1 + e^3)
// With two identical micro-steps: GA normalisation on gives (L + L) / 2 = L;
// off, 2 L and twice the gradient.
TEST(HandCase, NegativesCrossDataParallelShards) {
  const std::string batch = R"([[[[1],[2]]],[[[1],[-1]]]])";
  const std::string one_step = case_text(R"({"world":2,"dp":2})", true, "null", "fixed", "[[1]]", 1,
                                         "mean", R"("batches":[)" + batch + "]");
  const double loss = 1.5 + std::log(1 + std::exp(-3.0));
  const double grad = 3 - 6 / (1 + std::exp(3.0));
  expect_reference(reference_of("b", one_step), {loss, {}, {{grad}}});

  const std::string two_steps = case_text(R"({"world":2,"dp":2})", true, "null", "fixed", "[[1]]",
                                          2, "mean", R"("batches":[)" + batch + "," + batch + "]");
  expect_reference(reference_of("b-ga", two_steps), {loss, {}, {{grad}}});
  Json unnormalized = Json::parse(two_steps);
  unnormalized["accumulation"]["normalize"] = false;
  expect_reference(reference_of("b-ga-off", unnormalized.dump()), {2 * loss, {}, {{2 * grad}}});
}

// Case C: hard_negatives = 2 pads the group (q, p, n1) = (1, 1, 0) with one
// recorded draw j = 0. D = F = 1, W = (w), s = w^2, use_batch false.
//   legacy takes row j + 1 = p: group (q, p, n1, p), l = s (1, 0, 1), target 0
//     loss = log(2 e^s + 1) - s          -> log(2e + 1) - 1
//     dL/ds = 2 e^s / (2 e^s + 1) - 1 = -1 / (2 e^s + 1);  dL/dw = 2w dL/ds -> -2 / (2e + 1)
//   fixed takes row j + 2 = n1: group (q, p, n1, n1), l = s (1, 0, 0)
//     loss = log(e^s + 2) - s            -> log(e + 2) - 1
//     dL/ds = e^s / (e^s + 2) - 1 = -2 / (e^s + 2);      dL/dw -> -4 / (e + 2)
TEST(HandCase, RecordedPaddingLegacyPadsWithThePositive) {
  const std::string extra = R"("padding_draws":[[[0]]],"batches":[[[[[1],[1],[0]]]]])";
  const std::string legacy =
      case_text(R"({"world":1,"dp":1})", false, "2", "legacy", "[[1]]", 1, "mean", extra);
  const double legacy_loss = std::log(2 * kE + 1) - 1;
  expect_reference(reference_of("c-legacy", legacy),
                   {legacy_loss, {legacy_loss}, {{-2 / (2 * kE + 1)}}});
  const std::string fixed =
      case_text(R"({"world":1,"dp":1})", false, "2", "fixed", "[[1]]", 1, "mean", extra);
  const double fixed_loss = std::log(kE + 2) - 1;
  expect_reference(reference_of("c-fixed", fixed), {fixed_loss, {fixed_loss}, {{-4 / (kE + 2)}}});
}

// Case D: use_batch false over 2 DP shards. D = F = 1, W = (w), s = w^2.
//   shard 0: group (q, p, n) = (1, 2, -1): l = s (2, -1): loss0 = log(1 + e^-3s)
//   shard 1: group (q, p) = (1, 1): a single logit: loss1 = 0, no gradient
//   d loss0 / dw = 2w (-3 e^-3s / (1 + e^-3s)) -> -6 / (1 + e^3)
//   reduction mean: L = (loss0 + loss1) / 2, grad -3 / (1 + e^3)
//   reduction sum:  L = loss0 + loss1,       grad -6 / (1 + e^3)
//   shard_losses = (log(1 + e^-3), 0) either way.
TEST(HandCase, LocalLossMeanAndSumOverShards) {
  const std::string extra = R"("batches":[[[[[1],[2],[-1]]],[[[1],[1]]]]])";
  const double loss0 = std::log(1 + std::exp(-3.0));
  const double grad0 = -6 / (1 + std::exp(3.0));
  const std::string mean =
      case_text(R"({"world":2,"dp":2})", false, "null", "fixed", "[[1]]", 1, "mean", extra);
  expect_reference(reference_of("d-mean", mean), {loss0 / 2, {loss0, 0}, {{grad0 / 2}}});
  const std::string sum =
      case_text(R"({"world":2,"dp":2})", false, "null", "fixed", "[[1]]", 1, "sum", extra);
  expect_reference(reference_of("d-sum", sum), {loss0, {loss0, 0}, {{grad0}}});
}

// The human-readable form carries the same numbers at full precision.
TEST(HandCase, TableShowsTheLossToSeventeenDigits) {
  const std::string text =
      case_text(R"({"world":1,"dp":1})", false, "null", "fixed", "[[1,0],[0,1]]", 1, "mean",
                R"("batches":[[[[[1,0],[1,0],[0,1]]]]])");
  const auto dir = fresh_work_dir("hand-table");
  const auto file = write_text_file(dir / "a.json", text);
  const CliResult result = run_infonce_sim({"reference", "--case", file.string()});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  // The JSON's shortest round-trip form and the table's 17 digits read back
  // to the same double, bit for bit.
  const double json_loss = reference_of("a", text).at("loss").get<double>();
  bool found = false;
  for (const std::string& line : lines_of(result.out)) {
    if (!line.starts_with("loss ")) continue;
    found = true;
    const double table_loss = std::strtod(line.c_str() + 5, nullptr);
    expect_close(table_loss, std::log(1 + 1 / kE), "table loss");
    EXPECT_EQ(std::bit_cast<std::uint64_t>(table_loss), std::bit_cast<std::uint64_t>(json_loss));
  }
  EXPECT_TRUE(found) << result.out;
  EXPECT_NE(result.out.find("gradient dL/dW (D x F = 2 x 2)"), std::string::npos) << result.out;
}

}  // namespace
}  // namespace infonce::cli_test
