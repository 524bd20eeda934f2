// The field registry (step/field_configurations.*) against docs/field.md: the
// doc lists every registry row with the same strategy point, source, project
// and dagger, and each row's strategy point predicts the verdicts the doc
// states for it. The expected verdicts are read from the doc's own words
// ("ratio 1/P", "correct, equal batches", "no single ratio (dropped terms)",
// ...) at P = W = 4 (pure data parallelism, the projects' default), and at
// W = 8 for the cells whose phrase names W. An unknown phrase fails. The
// README's shorter table of the same rows is held to the same.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "base/concat.hpp"
#include "step/field_configurations.hpp"

namespace infonce::step {
namespace {

struct DocRow {
  std::vector<std::string> cells;  // cells[0] is the row number
  std::string source;              // the source cell, "same file" resolved to the row above
};

// Where a table's cells are: docs/field.md's, or the README's.
struct TableLayout {
  std::string file;     // under the source directory
  std::string section;  // the heading the table is under ("" for the whole file)
  std::size_t columns, source, point, encoders, direct, mark;
};

const TableLayout kFieldDoc{"docs/field.md", "", 8, 1, 4, 5, 6, 7};
const TableLayout kReadme{"README.md", "## Gather strategies and real projects", 6, 2, 3, 4, 5, 0};

std::string trimmed(const std::string& text) {
  const auto first = text.find_first_not_of(' ');
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(' ') - first + 1);
}

// The numbered rows of the configuration table, by number.
std::map<int, DocRow> read_doc_rows(const TableLayout& layout = kFieldDoc) {
  const std::string path = std::string(INFONCE_SOURCE_DIR) + "/" + layout.file;
  std::ifstream in(path);
  EXPECT_TRUE(in) << "cannot read " << path;
  std::map<int, DocRow> rows;
  std::string line;
  std::string previous_source;
  bool in_section = layout.section.empty();
  while (std::getline(in, line)) {
    if (!layout.section.empty() && line.starts_with("## ")) in_section = line == layout.section;
    if (!in_section) continue;
    if (line.size() < 4 || line[0] != '|' || line[2] < '0' || line[2] > '9') continue;
    DocRow row;
    std::istringstream parts(line.substr(1));
    std::string cell;
    while (std::getline(parts, cell, '|')) row.cells.push_back(trimmed(cell));
    EXPECT_EQ(row.cells.size(), layout.columns) << line;
    if (row.cells.size() != layout.columns) continue;
    const std::string& source = row.cells[layout.source];
    const bool same_file =
        source.find("same file") != std::string::npos || source.starts_with("[same]");
    row.source = same_file ? previous_source : source;
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

void expect_every_registry_row(const TableLayout& layout) {
  const auto rows = read_doc_rows(layout);
  ASSERT_EQ(rows.size(), field_configurations().size()) << layout.file;
  ASSERT_EQ(rows.size(), 18u);
  for (const FieldConfiguration& c : field_configurations()) {
    ASSERT_TRUE(rows.contains(c.row)) << "row " << c.row;
    const DocRow& row = rows.at(c.row);
    const std::string where = layout.file + " row " + std::to_string(c.row);
    EXPECT_EQ(row.cells[layout.point], concat("`", name_of(c.strategy), "`")) << where;
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
    EXPECT_EQ(row.cells[layout.mark].find("†") != std::string::npos, c.unconfirmed) << where;
  }
}

TEST(FieldConfigurations, TheDocListsEveryRegistryRowWithItsPointSourceAndDagger) {
  expect_every_registry_row(kFieldDoc);
}

TEST(FieldConfigurations, TheReadmeTableListsEveryRegistryRowWithItsPointSourceAndDagger) {
  expect_every_registry_row(kReadme);
}

void expect_stated_verdicts(const TableLayout& layout) {
  const auto rows = read_doc_rows(layout);
  int checked = 0;
  for (const FieldConfiguration& c : field_configurations()) {
    ASSERT_TRUE(rows.contains(c.row)) << "row " << c.row;
    const DocRow& row = rows.at(c.row);
    for (const int world : {4, 8}) {
      const StepShape shape{.dp = 4, .world = world};
      const std::string where =
          layout.file + " row " + std::to_string(c.row) + ", W = " + std::to_string(world);
      const std::string encoders = without_bold(row.cells[layout.encoders]);
      const std::string direct = direct_phrase(row.cells[layout.direct]);
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
  // 18 rows x 2 groups at W = P; at W = 2P tevatron's direct cell (its
  // encoders are correct over the world group: no W/P) and
  // pytorch-metric-learning's two direct cells.
  EXPECT_EQ(checked, 2 * 18 + 3) << layout.file;
}

TEST(FieldConfigurations, EachPointPredictsTheVerdictsTheDocStates) {
  expect_stated_verdicts(kFieldDoc);
}

TEST(FieldConfigurations, EachPointPredictsTheVerdictsTheReadmeStates) {
  expect_stated_verdicts(kReadme);
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
