// Group parsing (the trainer's numpy split), hard-negative resizing, the
// padding draw sources, and (d) the legacy padding defect.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

#include "base/error.hpp"
#include "loss/groups.hpp"
#include "loss/padding.hpp"

namespace infonce::loss {
namespace {

using Rows = std::vector<std::int32_t>;

// Replays a fixed list of draws and remembers the bounds it was asked for.
class ScriptedDraws final : public PaddingDrawSource {
 public:
  explicit ScriptedDraws(Rows draws) : draws_(std::move(draws)) {}
  std::int32_t draw(std::int32_t negative_count) override {
    bounds.push_back(negative_count);
    return draws_.at(next_++);
  }
  Rows bounds;
  std::size_t used() const { return next_; }

 private:
  Rows draws_;
  std::size_t next_ = 0;
};

Rows group_rows(const GroupLayout& layout, std::int32_t g) {
  const auto rows = layout.group(g);
  return {rows.begin(), rows.end()};
}

// Expects InputError whose message contains `fragment`.
void expect_input_error(const std::function<void()>& action, const std::string& fragment) {
  try {
    action();
    ADD_FAILURE() << "expected InputError containing \"" << fragment << "\"";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos) << error.what();
  }
}

TEST(Groups, LabelsMarkEachPositiveWithOne) {
  EXPECT_EQ(labels_for_negative_counts(Rows{2, 0, 1}),
            (std::vector<std::uint8_t>{1, 0, 0, 1, 1, 0}));
  EXPECT_TRUE(labels_for_negative_counts(Rows{}).empty());
  expect_input_error([] { labels_for_negative_counts(Rows{1, -1}); }, "negative_counts[1]");
}

TEST(Groups, ParseIsTheTrainersSplit) {
  // labels [1,0,0,1,1,0]: ones at 0, 3, 4; split = [0,3,4,6] + [0,1,2,3] = [0,4,6,9].
  const std::vector<std::uint8_t> labels{1, 0, 0, 1, 1, 0};
  const GroupLayout layout = parse_groups(labels, 9);
  ASSERT_EQ(layout.group_count(), 3);
  EXPECT_EQ(group_rows(layout, 0), (Rows{0, 1, 2, 3}));
  EXPECT_EQ(group_rows(layout, 1), (Rows{4, 5}));
  EXPECT_EQ(group_rows(layout, 2), (Rows{6, 7, 8}));
  EXPECT_EQ(layout.negative_count(0), 2);
  EXPECT_EQ(layout.negative_count(1), 0);
  EXPECT_EQ(layout.negative_count(2), 1);
}

TEST(Groups, ParseFollowsNumpyWhenLabelsDoNotStartWithOne) {
  // [0, 1, 0]: ones at 1; split = [1, 3] + [0, 1] = [1, 4]: row 0 is skipped, as in the trainer.
  const GroupLayout layout = parse_groups(std::vector<std::uint8_t>{0, 1, 0}, 4);
  ASSERT_EQ(layout.group_count(), 1);
  EXPECT_EQ(group_rows(layout, 0), (Rows{1, 2, 3}));
  // Any nonzero label counts as 1 (torch.nonzero).
  EXPECT_EQ(parse_groups(std::vector<std::uint8_t>{2, 0}, 3).group_count(), 1);
  // No 1 at all: no group.
  EXPECT_EQ(parse_groups(std::vector<std::uint8_t>{}, 0).group_count(), 0);
}

TEST(Groups, ParseRejectsLabelsNeedingMoreRows) {
  expect_input_error(
      [] {
        parse_groups(std::vector<std::uint8_t>{1, 0, 1}, 4);
      },
      "labels describe 5 rows (2 groups) but there are only 4 embeddings");
  // Extra trailing rows are allowed (the trainer slices).
  EXPECT_EQ(parse_groups(std::vector<std::uint8_t>{1}, 5).rows, (Rows{0, 1}));
}

TEST(Groups, AddGroupAppends) {
  GroupLayout layout;
  layout.add_group(Rows{4, 5, 6});
  layout.add_group(Rows{0, 1});
  EXPECT_EQ(layout.rows, (Rows{4, 5, 6, 0, 1}));
  EXPECT_EQ(layout.offsets, (Rows{0, 3, 5}));
  EXPECT_EQ(layout.group_count(), 2);
}

TEST(Groups, ResizeKeepsFirstHAndPadsInGroupOrder) {
  // Groups: [0 1 2 3 4] (k=3), [5 6 7] (k=1), [8 9 10] (k=1).
  const GroupLayout layout = parse_groups(labels_for_negative_counts(Rows{3, 1, 1}), 11);
  ScriptedDraws draws({0, 0});
  const GroupLayout fixed = resize_hard_negatives(layout, 2, Padding::fixed, draws);
  EXPECT_EQ(group_rows(fixed, 0), (Rows{0, 1, 2, 3}));  // first H negatives kept
  EXPECT_EQ(group_rows(fixed, 1), (Rows{5, 6, 7, 7}));  // j = 0 -> row j+2 = n_1
  EXPECT_EQ(group_rows(fixed, 2), (Rows{8, 9, 10, 10}));
  EXPECT_EQ(draws.bounds, (Rows{1, 1}));  // one draw in [0, k) per missing negative

  ScriptedDraws legacy_draws({0, 0});
  const GroupLayout legacy = resize_hard_negatives(layout, 2, Padding::legacy, legacy_draws);
  EXPECT_EQ(group_rows(legacy, 1), (Rows{5, 6, 7, 6}));  // j = 0 -> row j+1 = the positive
  EXPECT_EQ(group_rows(legacy, 2), (Rows{8, 9, 10, 9}));

  ScriptedDraws unused({});
  const GroupLayout zero = resize_hard_negatives(layout, 0, Padding::fixed, unused);
  EXPECT_EQ(zero.rows, (Rows{0, 1, 5, 6, 8, 9}));
}

TEST(Groups, ResizeRejectsAGroupWithoutNegativesAndNegativeH) {
  const GroupLayout layout = parse_groups(labels_for_negative_counts(Rows{1, 0}), 5);
  ScriptedDraws draws({});
  expect_input_error([&] { resize_hard_negatives(layout, 1, Padding::fixed, draws); },
                     "hard_negatives needs >= 1 negative per group (group 1 has none)");
  expect_input_error([&] { resize_hard_negatives(layout, -1, Padding::fixed, draws); },
                     "hard_negatives = -1 must be >= 0");
}

// (d) Over every k in 1..4, H in k+1..k+3 and every draw sequence: legacy
// pads with the positive exactly when some j = 0 (and never with the last
// negative); fixed never pads with the positive.
TEST(Groups, LegacyPaddingPutsThePositiveAmongNegativesFixedNever) {
  std::int64_t legacy_with_positive = 0;
  std::int64_t sequences = 0;
  for (std::int32_t k = 1; k <= 4; ++k) {
    Rows counts{k};
    const GroupLayout layout = parse_groups(labels_for_negative_counts(counts), k + 2);
    const std::int32_t positive_row = 1;
    const std::int32_t last_negative_row = k + 1;
    for (std::int32_t h = k + 1; h <= k + 3; ++h) {
      const std::int32_t missing = h - k;
      std::int64_t total = 1;
      for (std::int32_t i = 0; i < missing; ++i) total *= k;
      for (std::int64_t code = 0; code < total; ++code) {
        Rows sequence;
        bool draws_zero = false;
        for (std::int64_t rest = code, i = 0; i < missing; ++i, rest /= k) {
          sequence.push_back(static_cast<std::int32_t>(rest % k));
          draws_zero = draws_zero || sequence.back() == 0;
        }
        for (const Padding padding : {Padding::legacy, Padding::fixed}) {
          ScriptedDraws draws(sequence);
          const Rows rows = group_rows(resize_hard_negatives(layout, h, padding, draws), 0);
          ASSERT_EQ(static_cast<std::int32_t>(rows.size()), h + 2);
          const Rows padded(rows.begin() + k + 2, rows.end());
          const bool has_positive =
              std::find(padded.begin(), padded.end(), positive_row) != padded.end();
          const bool has_last =
              std::find(padded.begin(), padded.end(), last_negative_row) != padded.end();
          if (padding == Padding::legacy) {
            EXPECT_EQ(has_positive, draws_zero);
            EXPECT_FALSE(has_last);
            legacy_with_positive += has_positive ? 1 : 0;
          } else {
            EXPECT_FALSE(has_positive);
          }
        }
        ++sequences;
      }
    }
  }
  EXPECT_EQ(sequences, 1 + 1 + 1 + (2 + 4 + 8) + (3 + 9 + 27) + (4 + 16 + 64));
  EXPECT_GT(legacy_with_positive, 0);
}

TEST(Padding, GeneratedStreamsAreSeededAndRunAcrossMicroSteps) {
  GeneratedPadding plan({7, 7, 8});
  Rng reference(7);
  for (std::int32_t micro = 0; micro < 3; ++micro) {
    // Stream 0 continues one generator across micro-steps: draw(k) = below(k).
    EXPECT_EQ(plan.source(micro, 0).draw(5), static_cast<std::int32_t>(reference.below(5)));
  }
  Rng same_seed(7);
  EXPECT_EQ(plan.source(0, 1).draw(1000), static_cast<std::int32_t>(same_seed.below(1000)));
  Rng other_seed(8);
  EXPECT_EQ(plan.source(0, 2).draw(1000), static_cast<std::int32_t>(other_seed.below(1000)));
  expect_input_error([&] { plan.source(0, 3); }, "padding stream 3 out of range (3 generators)");
}

TEST(Padding, RecordedReplaysAndReportsEveryMisuse) {
  const RecordedDraws recorded{{{1, 0}, {2}}, {{}}};
  RecordedPadding plan(recorded);
  EXPECT_EQ(plan.source(0, 0).draw(2), 1);
  EXPECT_EQ(plan.source(0, 0).draw(2), 0);
  expect_input_error([&] { plan.source(0, 0).draw(2); }, "padding_draws[0][0]: ran out of draws");
  expect_input_error([&] { plan.check_all_used(); }, "padding_draws[0][1]: 1 draws left unused");
  expect_input_error([&] { plan.source(0, 1).draw(2); },
                     "padding_draws[0][1]: index 2 out of range for a group with 2 negatives");
  plan.check_all_used();  // the out-of-range draw was consumed
  expect_input_error([&] { plan.source(1, 0).draw(3); }, "padding_draws[1][0]: ran out of draws");
  expect_input_error([&] { plan.source(2, 0); }, "padding_draws[2][0]: no such micro-step");
  expect_input_error([&] { plan.source(1, 1); }, "padding_draws[1][1]: no such stream");
}

}  // namespace
}  // namespace infonce::loss
