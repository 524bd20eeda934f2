// The field registry (step/field_configurations.*) against docs/field.md: the
// doc lists every registry row with the same strategy point, source, project
// and dagger, and each row's strategy point predicts the verdicts the doc
// states for it. The expected verdicts are read from the doc's own words
// ("ratio 1/P", "correct, equal batches", "no single ratio (dropped terms)",
// ...) at P = W = 4 (pure data parallelism, the projects' default), and at
// W = 8 for the cells whose phrase names W. An unknown phrase fails.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "step/field_configurations.hpp"
#include "base/concat.hpp"

namespace infonce::step {
namespace {

struct DocRow {
  std::vector<std::string> cells;  // cells[0] is the row number
  std::string source;              // the source cell, "same file" resolved to the row above
};

std::string trimmed(const std::string& text) {
  const auto first = text.find_first_not_of(' ');
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(' ') - first + 1);
}

// The numbered rows of the configuration table, by number.
std::map<int, DocRow> read_doc_rows() {
  const std::string path = std::string(INFONCE_SOURCE_DIR) + "/docs/field.md";
  std::ifstream in(path);
  EXPECT_TRUE(in) << "cannot read " << path;
  std::map<int, DocRow> rows;
  std::string line;
  std::string previous_source;
  while (std::getline(in, line)) {
    if (line.size() < 4 || line[0] != '|' || line[2] < '0' || line[2] > '9') continue;
    DocRow row;
    std::istringstream parts(line.substr(1));
    std::string cell;
    while (std::getline(parts, cell, '|')) row.cells.push_back(trimmed(cell));
    EXPECT_EQ(row.cells.size(), 8u) << line;
    if (row.cells.size() != 8) continue;
    const bool same_file = row.cells[1].find("same file") != std::string::npos;
    row.source = same_file ? previous_source : row.cells[1];
    previous_source = row.source;
    rows[std::stoi(row.cells[0])] = row;
  }
  return rows;
}

std::string without_bold(std::string text) {
  for (auto at = text.find("**"); at != std::string::npos; at = text.find("**")) {
    text.erase(at, 2);
  }
  return text;
}

// A verdict phrase of the doc as a prediction at P = 4 (P = W unless stated).
std::optional<Prediction> expected_from(const std::string& phrase, double w_over_p) {
  Prediction p;
  p.depends_on_equal_batches = phrase.find("equal batches") != std::string::npos;
  if (phrase.starts_with("no single ratio (dropped terms)")) {
    p.verdict = Verdict::no_single_ratio;
    p.ratio = 0;
    p.cause = NoRatioCause::dropped_terms;
    p.depends_on_equal_batches = false;
  } else if (phrase.starts_with("correct when W = P (ratio W/P otherwise)")) {
    p.ratio = w_over_p;
    p.verdict = w_over_p == 1 ? Verdict::correct : Verdict::ratio;
  } else if (phrase.starts_with("correct")) {
    p.verdict = Verdict::correct;
  } else if (phrase.starts_with("ratio 1/P")) {
    p.verdict = Verdict::ratio;
    p.ratio = 0.25;
  } else if (phrase.starts_with("ratio P")) {
    p.verdict = Verdict::ratio;
    p.ratio = 4;
  } else if (phrase.starts_with("ratio W")) {
    p.verdict = Verdict::ratio;
    p.ratio = 4 * w_over_p;
  } else {
    return std::nullopt;
  }
  return p;
}

// The direct-parameter cell's verdict: after "learnable: " when the project
// has none, else after the parameter's name if the cell names one; up to
// ")" or ";".
std::string direct_phrase(const std::string& cell) {
  const std::string text = without_bold(cell);
  const auto learnable = text.rfind("learnable: ");
  const auto named = text.find(": ");
  std::string phrase = learnable != std::string::npos
                           ? text.substr(learnable + std::string("learnable: ").size())
                       : named != std::string::npos ? text.substr(named + 2)
                                                    : text;
  return phrase.substr(0, phrase.find_first_of(");"));
}

void expect_same(const Prediction& expected, const Prediction& actual, const std::string& where) {
  EXPECT_EQ(expected.verdict, actual.verdict) << where;
  EXPECT_EQ(expected.ratio, actual.ratio) << where;
  EXPECT_EQ(expected.cause, actual.cause) << where;
  EXPECT_EQ(expected.depends_on_equal_batches, actual.depends_on_equal_batches) << where;
}

TEST(FieldConfigurations, TheDocListsEveryRegistryRowWithItsPointSourceAndDagger) {
  const auto rows = read_doc_rows();
  ASSERT_EQ(rows.size(), field_configurations().size());
  ASSERT_EQ(rows.size(), 17u);
  for (const FieldConfiguration& c : field_configurations()) {
    ASSERT_TRUE(rows.contains(c.row)) << "row " << c.row;
    const DocRow& row = rows.at(c.row);
    const std::string where = "docs/field.md row " + std::to_string(c.row);
    EXPECT_EQ(row.cells[4], concat("`", name_of(c.strategy), "`")) << where;
    const std::string source(c.source);
    const std::string file = source.substr(0, source.find(' '));
    EXPECT_NE(row.source.find(file), std::string::npos) << where << ": " << file;
    const auto at = source.find("@ ");
    if (at != std::string::npos) {
      const std::string commit = source.substr(at + 2, 8);
      EXPECT_NE(row.source.find(commit), std::string::npos) << where << ": " << commit;
    }
    const std::string name(c.project.substr(c.project.find('/') + 1));
    EXPECT_NE(row.source.find(name), std::string::npos) << where << ": " << name;
    EXPECT_EQ(row.cells[7].find("†") != std::string::npos, c.unconfirmed) << where;
  }
}

TEST(FieldConfigurations, EachPointPredictsTheVerdictsTheDocStates) {
  const auto rows = read_doc_rows();
  int checked = 0;
  for (const FieldConfiguration& c : field_configurations()) {
    ASSERT_TRUE(rows.contains(c.row)) << "row " << c.row;
    const DocRow& row = rows.at(c.row);
    for (const int world : {4, 8}) {
      const StepShape shape{.dp = 4, .world = world};
      const std::string where = "row " + std::to_string(c.row) + ", W = " + std::to_string(world);
      const std::string encoders = without_bold(row.cells[5]);
      const std::string direct = direct_phrase(row.cells[6]);
      // The doc speaks of W != P only where a phrase names W; elsewhere W = P.
      if (world == 4 || encoders.find("W/P") != std::string::npos) {
        const auto expected = expected_from(encoders, world / 4.0);
        ASSERT_TRUE(expected) << where << ": unknown phrase " << encoders;
        expect_same(*expected, predict(c.strategy, ParameterGroup::encoders, shape),
                    where + " encoders");
        ++checked;
      }
      if (world == 4 || direct.starts_with("ratio W")) {
        const auto expected = expected_from(direct, world / 4.0);
        ASSERT_TRUE(expected) << where << ": unknown phrase " << direct;
        expect_same(*expected, predict(c.strategy, ParameterGroup::direct, shape),
                    where + " direct");
        ++checked;
      }
    }
  }
  // 17 rows x 2 groups at W = P; at W = 2P tevatron's two cells and
  // pytorch-metric-learning's two direct cells.
  EXPECT_EQ(checked, 2 * 17 + 4);
}

// The registry's own invariants: numbered 1..n in order, distinct rows.
TEST(FieldConfigurations, RowsAreNumberedInOrderAndUseTheMeanReduction) {
  int expected_row = 1;
  for (const FieldConfiguration& c : field_configurations()) {
    EXPECT_EQ(c.row, expected_row++);
    EXPECT_EQ(c.strategy.reduction, Reduction::mean);
    EXPECT_FALSE(c.project.empty());
    EXPECT_FALSE(c.configuration.empty());
  }
}

}  // namespace
}  // namespace infonce::step
