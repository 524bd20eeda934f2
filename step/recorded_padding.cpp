#include "step/recorded_padding.hpp"

#include <algorithm>
#include <utility>
#include <vector>

#include "base/assert.hpp"
#include "loss/groups.hpp"

namespace infonce::step {
namespace {

// Passes draws through from the generator and keeps a copy of each.
class RecordingSource final : public loss::PaddingDrawSource {
 public:
  RecordingSource(loss::PaddingDrawSource& generator, std::vector<std::int32_t>& record)
      : generator_(generator), record_(record) {}
  std::int32_t draw(std::int32_t negative_count) override {
    const std::int32_t j = generator_.draw(negative_count);
    record_.push_back(j);
    return j;
  }

 private:
  loss::PaddingDrawSource& generator_;
  std::vector<std::int32_t>& record_;
};

// The negative counts of the groups DP shard `d` pads in micro-step `micro`,
// parsed from labels as the rank program parses them: with a gather, every
// shard's labels in DP order; otherwise the shard's own.
loss::GroupLayout padded_layout(const Case& c, std::int32_t micro, std::int32_t d) {
  const auto& shards = c.batches[static_cast<std::size_t>(micro)];
  const bool gather = c.loss.use_batch && c.mesh.dp > 1;
  std::vector<std::uint8_t> labels;
  std::int64_t rows = 0;
  for (std::int32_t s = gather ? 0 : d; s < (gather ? c.mesh.dp : d + 1); ++s) {
    const loss::ShardBatch& batch = shards[static_cast<std::size_t>(s)];
    const std::vector<std::uint8_t> own = loss::labels_for_negative_counts(batch.negative_counts);
    labels.insert(labels.end(), own.begin(), own.end());
    rows += batch.features.rows();
  }
  return loss::parse_groups(labels, static_cast<std::int32_t>(rows));
}

}  // namespace

loss::RecordedDraws record_padding_draws(const Case& c) {
  validate_case(c);  // the replay below indexes batches by micro-step and shard
  if (c.padding_draws) return *c.padding_draws;
  const auto dp = static_cast<std::size_t>(c.mesh.dp);
  loss::RecordedDraws draws(static_cast<std::size_t>(c.accumulation_steps),
                            std::vector<std::vector<std::int32_t>>(dp));
  if (!c.loss.hard_negatives) return draws;
  // The rank program's generators: stream d is world rank d * R's.
  std::vector<std::uint64_t> seeds;
  for (std::int32_t d = 0; d < c.mesh.dp; ++d) {
    seeds.push_back(padding_seed_of_rank(c, d * c.mesh.replicas()));
  }
  loss::GeneratedPadding generators(std::move(seeds));
  // Micro-steps outside the accumulation window draw nothing.
  for (std::int32_t m = 0; m < c.micro_steps_run(); ++m) {
    for (std::int32_t d = 0; d < c.mesh.dp; ++d) {
      RecordingSource recording(generators.source(m, d),
                                draws[static_cast<std::size_t>(m)][static_cast<std::size_t>(d)]);
      // The resized layout itself is not needed: only the draws it made.
      (void)loss::resize_hard_negatives(padded_layout(c, m, d), *c.loss.hard_negatives,
                                        c.loss.padding, recording);
    }
  }
  return draws;
}

Case with_recorded_padding(Case c) {
  if (!c.loss.hard_negatives || c.padding_draws) return c;
  c.padding_draws = record_padding_draws(c);
  return c;
}

}  // namespace infonce::step
