#include "step/rank_program.hpp"

#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>

#include "base/assert.hpp"
#include "base/error.hpp"
#include "loss/encoder.hpp"
#include "loss/groups.hpp"
#include "loss/infonce.hpp"
#include "loss/learnable_temperature.hpp"
#include "loss/padding.hpp"
#include "sim/ddp.hpp"
#include "step/clip_rank_program.hpp"
#include "step/flat_gradient.hpp"
#include "step/gather.hpp"
#include "step/ntxent_rank_program.hpp"
#include "step/row_bounds.hpp"
#include "step/siglip_rank_program.hpp"
#include "step/strategy.hpp"

namespace infonce::step {
namespace {

// The global batch as one rank sees it after the gather: every shard's rows
// in slot order, the rank's own live rows at [own_offset, own_offset + own_rows).
// With a shared loss cache the embeddings may be a gather's shared
// concatenation (`shared`, when the rank's own rows equal its gathered slot).
template <class Scalar>
struct GlobalBatch {
  Matrix<Scalar> embeddings;
  SharedInput<Matrix<Scalar>> shared;  // set: the embeddings are *shared.value
  std::vector<std::uint8_t> labels;
  std::int64_t own_offset = 0;
  const Matrix<Scalar>& matrix() const { return shared.value ? *shared.value : embeddings; }
};

// Every shard of an object gather concatenated in slot order (what assemble
// builds when the own slot holds the rank's own bits), with its hash.
template <class Scalar>
ConcatenatedShards<Scalar> concatenate_shards(const sim::GatheredObjects& objects,
                                              std::int64_t cols) {
  ConcatenatedShards<Scalar> out;
  std::vector<ShardView> shards;
  shards.reserve(objects.size());
  out.row_offsets.reserve(objects.size() + 1);
  out.row_offsets.push_back(0);
  for (const auto& bytes : objects) {
    shards.push_back(shard_from_bytes(bytes, sizeof(Scalar)));
    out.row_offsets.push_back(out.row_offsets.back() + shards.back().rows);
  }
  auto matrix = std::make_shared<Matrix<Scalar>>(out.row_offsets.back(), cols);
  for (std::size_t i = 0; i < shards.size(); ++i) {
    const ShardView& shard = shards[i];
    if (shard.rows == 0) continue;
    INFONCE_ASSERT(shard.cols == cols);
    INFONCE_ASSERT_ROWS(out.row_offsets[i], shard.rows, matrix->rows());
    std::memcpy(matrix->row(out.row_offsets[i]).data(), shard.values,
                sizeof(Scalar) * static_cast<std::size_t>(shard.rows * shard.cols));
  }
  out.embeddings.hash = SharedLosses<Scalar>::hash_of(*matrix);
  out.embeddings.value = std::move(matrix);
  return out;
}

// Whether slot `own_slot` of an object gather holds exactly the rank's live
// rows `local` (shape and bits): then the assembled batch, which puts `local`
// in that slot, is the concatenation of the gathered shards.
template <class Scalar>
bool slot_holds_own_rows(const sim::GatheredObjects& objects, const Matrix<Scalar>& local,
                         std::int32_t own_slot) {
  if (own_slot < 0 || static_cast<std::size_t>(own_slot) >= objects.size()) return false;
  const ShardView own =
      shard_from_bytes(objects[static_cast<std::size_t>(own_slot)], sizeof(Scalar));
  return own.rows == local.rows() && own.cols == local.cols() &&
         (local.size() == 0 ||
          std::memcmp(own.values, local.data(),
                      sizeof(Scalar) * static_cast<std::size_t>(local.size())) == 0);
}

// Slot `own_slot` holds the live local rows (every other slot is a constant);
// the slots are concatenated in order.
template <class Scalar>
GlobalBatch<Scalar> assemble(Gathered<Scalar> gathered, const Matrix<Scalar>& local,
                             std::int32_t own_slot) {
  AssembledRows<Scalar> rows = assemble_rows(gathered, local, own_slot);
  GlobalBatch<Scalar> global;
  global.embeddings = std::move(rows.rows);
  global.own_offset = rows.own_offset;
  global.labels = std::move(gathered.labels);
  return global;
}

std::int64_t count_padded_positives(const loss::GroupLayout& layout) {
  std::int64_t count = 0;
  for (std::int32_t g = 0; g < layout.group_count(); ++g) {
    const auto rows = layout.group(g);
    for (std::size_t k = 2; k < rows.size(); ++k) count += rows[k] == rows[1] ? 1 : 0;
  }
  return count;
}

// Which gathered slot each group of `layout` belongs to (its query's row).
std::vector<std::int32_t> slot_of_groups(const loss::GroupLayout& layout,
                                         const std::vector<std::int64_t>& slot_rows) {
  std::vector<std::int32_t> slots;
  std::int32_t slot = 0;
  std::int64_t slot_end = slot_rows.empty() ? 0 : slot_rows[0];
  for (std::int32_t g = 0; g < layout.group_count(); ++g) {
    const std::int32_t query = layout.group(g)[0];
    while (query >= slot_end) {
      ++slot;
      INFONCE_ASSERT(static_cast<std::size_t>(slot) < slot_rows.size());
      slot_end += slot_rows[static_cast<std::size_t>(slot)];
    }
    slots.push_back(slot);
  }
  return slots;
}

// Mutant rank-major-documents (a layout mismatch a popular library shipped):
// every rank lays its documents out positives first, [p.., n..], and the
// gather concatenates them rank by rank, [p n n | p n n], while the targets
// still assume every positive first (query g's target is document g). The
// same documents, so the layout keeps each group's size and hands out the
// document list in that order: group g's "positive" is document g, the
// remaining documents fill the negative places in order.
loss::GroupLayout rank_major_documents(const loss::GroupLayout& layout,
                                       const std::vector<std::int32_t>& slot_of_group) {
  std::vector<std::int32_t> documents;
  const std::int32_t slots = slot_of_group.empty() ? 0 : slot_of_group.back() + 1;
  for (std::int32_t s = 0; s < slots; ++s) {
    for (std::int32_t g = 0; g < layout.group_count(); ++g) {
      if (slot_of_group[g] == s) documents.push_back(layout.group(g)[1]);
    }
    for (std::int32_t g = 0; g < layout.group_count(); ++g) {
      if (slot_of_group[g] != s) continue;
      const auto rows = layout.group(g);
      documents.insert(documents.end(), rows.begin() + 2, rows.end());
    }
  }
  const auto groups = static_cast<std::size_t>(layout.group_count());
  std::size_t next_negative = groups;
  loss::GroupLayout out;
  std::vector<std::int32_t> rows;
  for (std::int32_t g = 0; g < layout.group_count(); ++g) {
    const auto original = layout.group(g);
    INFONCE_ASSERT_ROWS(static_cast<std::int64_t>(next_negative),
                        static_cast<std::int64_t>(original.size()) - 2,
                        static_cast<std::int64_t>(documents.size()));
    rows.assign({original[0], documents[static_cast<std::size_t>(g)]});
    for (std::size_t k = 2; k < original.size(); ++k) rows.push_back(documents[next_negative++]);
    out.add_group(rows);
  }
  INFONCE_ASSERT(next_negative == documents.size());
  return out;
}

// Mutant targets-offset-by-world-rank: the rank's own groups take their
// targets `arange(b) + offset` with the offset counted from the world rank's
// slot instead of the DP rank's. With replicas (R > 1) the offset is wrong; a
// target beyond the batch raises in the trainer (IndexError), and one inside
// it makes the group's positive another group's.
loss::GroupLayout targets_at_world_rank(const loss::GroupLayout& layout,
                                        const std::vector<std::int32_t>& slot_of_group,
                                        std::int32_t own_slot, std::int32_t world_rank) {
  std::int32_t first_own = 0;
  std::int32_t first_of_world_slot = 0;
  for (const std::int32_t slot : slot_of_group) {
    first_own += slot < own_slot ? 1 : 0;
    first_of_world_slot += slot < world_rank ? 1 : 0;
  }
  loss::GroupLayout out;
  std::vector<std::int32_t> rows;
  for (std::int32_t g = 0; g < layout.group_count(); ++g) {
    rows.assign(layout.group(g).begin(), layout.group(g).end());
    if (slot_of_group[g] == own_slot) {
      const std::int32_t target = g - first_own + first_of_world_slot;
      INFONCE_ASSERT(target >= 0);
      if (target >= layout.group_count()) {
        throw InputError("target " + std::to_string(target) + " is outside the " +
                         std::to_string(layout.group_count()) +
                         " groups (IndexError in the trainer)");
      }
      rows[1] = layout.group(target)[1];
    }
    out.add_group(rows);
  }
  return out;
}

// The rank's hard-negative generator (or recorded draws), running on across
// micro-steps, and the stream it reads.
struct RankPadding {
  std::unique_ptr<loss::PaddingPlan> plan;
  std::int32_t stream = 0;
};

RankPadding rank_padding(const Case& c, std::int32_t world_rank) {
  if (c.padding_draws) {
    return {loss::RecordedPadding::viewing(*c.padding_draws), c.mesh.dp_rank(world_rank)};
  }
  return {std::make_unique<loss::GeneratedPadding>(
              std::vector<std::uint64_t>{padding_seed_of_rank(c, world_rank)}),
          0};
}

template <class Scalar>
std::shared_ptr<const loss::LossAndGradient<Scalar>> loss_and_gradient(
    SharedLosses<Scalar>* shared, std::int32_t micro, const Matrix<Scalar>& embeddings,
    const loss::GroupLayout& layout, const loss::LossSettings& settings) {
  if (shared != nullptr) {
    return shared->loss_and_gradient(micro, embeddings, layout, settings);
  }
  return std::make_shared<const loss::LossAndGradient<Scalar>>(
      loss::infonce_loss_and_gradient<Scalar>(embeddings, layout, settings));
}

// The groups of `layout` whose query is in slot `own_slot` (contiguous: the
// groups are in slot order): [first, first + count).
struct OwnGroups {
  std::int32_t first = 0;
  std::int32_t count = 0;
};

OwnGroups own_groups(const loss::GroupLayout& layout, const std::vector<std::int64_t>& slot_rows,
                     std::int32_t own_slot) {
  OwnGroups own;
  for (const std::int32_t slot : slot_of_groups(layout, slot_rows)) {
    own.first += slot < own_slot ? 1 : 0;
    own.count += slot == own_slot ? 1 : 0;
  }
  INFONCE_ASSERT_ROWS(own.first, own.count, layout.group_count());
  return own;
}

}  // namespace

double accumulation_divisor(const Case& c, const StepVariant& v) {
  // A partial window (SPEC section 12) is normalised by the micro-steps that ran.
  const double steps = v.window_by_configured_steps ? c.accumulation_steps : c.micro_steps_run();
  const double once = c.accumulation_normalize ? steps : 1.0;
  switch (v.accumulation) {
    case AccumulationScaling::once:
      return once;
    case AccumulationScaling::missing:
      return 1.0;
    case AccumulationScaling::twice:
      return once * steps;
  }
  INFONCE_ASSERT(false);
  return 1.0;
}

double compensation_scale(const Case& c, const StepVariant& v) {
  return backward_scale(strategy_of(c, v).scale, {.dp = c.mesh.dp, .world = c.mesh.world});
}

template <class Scalar>
RankOutput<Scalar> run_rank_program(sim::Communicator& comm, const Case& c, const StepVariant& v,
                                    SharedLosses<Scalar>* shared) {
  if (c.clip) return run_clip_rank_program<Scalar>(comm, c, v);
  if (c.ntxent) return run_ntxent_rank_program<Scalar>(comm, c, v);
  if (c.siglip) return run_siglip_rank_program<Scalar>(comm, c, v);
  const std::int32_t world_rank = comm.world_rank();
  INFONCE_ASSERT(comm.world_size() == c.mesh.world);
  const std::int32_t dp_rank = c.mesh.dp_rank(world_rank);
  const sim::Group dp_group = comm.split(c.mesh.replica(world_rank), dp_rank);
  INFONCE_ASSERT(dp_group.size() == c.mesh.dp);

  const Matrix<Scalar> weight = c.weight.cast<Scalar>();
  const Strategy strategy = strategy_of(c, v);
  const GatherSlots slots = gather_slots(comm, dp_group, strategy.group, c.mesh);
  const bool gather = c.loss.use_batch && slots.group.size() > 1;
  // The strategy decides only where there is a gather: without one every row
  // is live and the loss is the rank's own.
  const GatherKind gather_kind = gather ? strategy.gather : GatherKind::detached_own_live;
  const bool local_loss = gather && strategy.scope == LossScope::local;
  const std::int32_t own_slot = v.own_slot_at_world_rank ? world_rank : slots.own;
  const auto scale = static_cast<Scalar>(compensation_scale(c, v));
  const auto divisor = static_cast<Scalar>(accumulation_divisor(c, v));
  RankPadding padding = rank_padding(c, world_rank);

  RankOutput<Scalar> out;
  FlatGradient<Scalar> gradient(static_cast<std::size_t>(weight.size()), direct_parameter_count(c));
  Matrix<Scalar> features_storage;  // float cases: the features cast to float
  for (std::int32_t micro = 0; micro < c.micro_steps_run(); ++micro) {
    INFONCE_ASSERT_INDEX(micro, static_cast<std::int32_t>(c.batches.size()));
    INFONCE_ASSERT_INDEX(dp_rank, static_cast<std::int32_t>(c.batches[micro].size()));
    const loss::ShardBatch& batch = c.batches[micro][dp_rank];
    const Matrix<Scalar>& features = as_scalar<Scalar>(batch.features, features_storage);
    const Matrix<Scalar> local = loss::encode(weight, features, c.encoder_normalize);
    std::vector<std::uint8_t> labels = loss::labels_for_negative_counts(batch.negative_counts);

    GlobalBatch<Scalar> global;
    std::vector<std::int64_t> slot_rows;  // rows of each gathered slot, in slot order
    const bool layout_rewritten =
        c.loss.hard_negatives || v.rank_major_documents || v.targets_at_world_rank;
    // The slots' row counts: for the layout mutants, the local loss's own
    // groups and the autograd gather's reduce-scatter.
    const bool needs_slot_rows = v.rank_major_documents || v.targets_at_world_rank || local_loss ||
                                 gather_kind == GatherKind::autograd;
    // Set when the batch is a shared concatenation: the gathered labels, from
    // which the layout can come shared too.
    sim::GatheredObjects shared_labels;
    if (gather) {
      Gathered<Scalar> gathered;
      if (c.gather == GatherPath::object && shared != nullptr) {
        GatheredObjectPair pair =
            gather_object_pair(comm, slots.group, matrix_to_bytes(local), labels);
        if (slot_holds_own_rows(pair.matrices, local, own_slot)) {
          const auto concatenation = shared->concatenations.get(pair.matrices, local.cols(), [&] {
            return concatenate_shards<Scalar>(pair.matrices, local.cols());
          });
          global.shared = concatenation->embeddings;
          const auto& offsets = concatenation->row_offsets;
          INFONCE_ASSERT_INDEX(own_slot, static_cast<std::int32_t>(offsets.size()) - 1);
          global.own_offset = offsets[static_cast<std::size_t>(own_slot)];
          if (needs_slot_rows) {
            for (std::size_t i = 0; i + 1 < offsets.size(); ++i)
              slot_rows.push_back(offsets[i + 1] - offsets[i]);
          }
          shared_labels = std::move(pair.labels);
        } else {
          gathered = from_objects<Scalar>(std::move(pair));
        }
      } else {
        gathered = c.gather == GatherPath::object
                       ? gather_objects(comm, slots.group, local, labels)
                       : gather_tensors(comm, slots.group, local, labels, !v.labels_ungathered);
      }
      if (!global.shared.value) {
        for (std::size_t i = 0; i < gathered.shards.size(); ++i) {
          slot_rows.push_back(static_cast<std::int32_t>(i) == own_slot ? local.rows()
                                                                       : gathered.shards[i].rows);
        }
        global = assemble(std::move(gathered), local, own_slot);
      }
    } else {
      global.embeddings = local;
      global.labels = std::move(labels);
      slot_rows.push_back(local.rows());
    }
    const Matrix<Scalar>& embeddings = global.matrix();
    const auto row_count = static_cast<std::int32_t>(embeddings.rows());
    INFONCE_ASSERT_ROWS(global.own_offset, local.rows(), embeddings.rows());

    SharedInput<loss::GroupLayout> shared_layout;
    loss::GroupLayout layout;
    if (!shared_labels.empty() && !layout_rewritten) {
      // A pure function of the gathered labels: parsed once per gather result.
      const auto groups = shared->layouts.get(shared_labels, row_count, [&] {
        auto parsed = std::make_shared<const loss::GroupLayout>(
            loss::parse_groups(concatenated_labels(shared_labels), row_count));
        GatheredGroups g;
        g.padded_positives = count_padded_positives(*parsed);
        g.layout.hash = SharedLosses<Scalar>::hash_of(*parsed);
        g.layout.value = std::move(parsed);
        return g;
      });
      out.padded_positives += groups->padded_positives;
      shared_layout = groups->layout;
    } else {
      if (!shared_labels.empty()) global.labels = concatenated_labels(shared_labels);
      layout = loss::parse_groups(global.labels, row_count);
      if (c.loss.hard_negatives) {
        layout = loss::resize_hard_negatives(layout, *c.loss.hard_negatives, c.loss.padding,
                                             padding.plan->source(micro, padding.stream));
      }
      out.padded_positives += count_padded_positives(layout);
      if (needs_slot_rows) {
        const std::vector<std::int32_t> slots = slot_of_groups(layout, slot_rows);
        if (v.rank_major_documents && c.loss.use_batch)
          layout = rank_major_documents(layout, slots);
        if (v.targets_at_world_rank && gather) {
          layout = targets_at_world_rank(layout, slots, own_slot, world_rank);
        }
      }
    }

    // The loss and its dL/d(gathered rows); a local loss also keeps the share
    // through the own queries as logit rows. Each rank its own queries: no two
    // ranks share a local loss's inputs.
    std::shared_ptr<const loss::LossAndGradient<Scalar>> global_result;
    std::optional<loss::LocalLossAndGradient<Scalar>> local_result;
    if (local_loss) {
      const loss::GroupLayout& parsed = shared_layout.value ? *shared_layout.value : layout;
      const OwnGroups own = own_groups(parsed, slot_rows, own_slot);
      local_result = loss::infonce_local_loss_and_gradient<Scalar>(embeddings, parsed, c.loss,
                                                                   own.first, own.count);
    } else if (global.shared.value) {
      if (!shared_layout.value) {
        shared_layout.hash = SharedLosses<Scalar>::hash_of(layout);
        shared_layout.value = std::make_shared<const loss::GroupLayout>(std::move(layout));
      }
      global_result = shared->loss_and_gradient(micro, global.shared, shared_layout, c.loss);
    } else {
      global_result = loss_and_gradient(shared, micro, embeddings, layout, c.loss);
    }
    const Scalar loss_value = local_result ? local_result->loss : global_result->loss;
    const Matrix<Scalar>& grad_embeddings =
        local_result ? local_result->grad_embeddings : global_result->grad_embeddings;
    const Scalar reported = v.scale_reported_loss ? loss_value * scale : loss_value;
    out.reported_loss += reported / divisor;

    const Matrix<Scalar> own_grad =
        own_rows_gradient(comm, slots.group, gather_kind, grad_embeddings,
                          local_result ? &local_result->grad_query_rows : nullptr, slot_rows,
                          global.own_offset, local.rows(), slots.own);
    Matrix<Scalar> grad_weight =
        gather_kind == GatherKind::detached && !local_loss
            ? Matrix<Scalar>::Zero(weight.rows(), weight.cols())
            : loss::encode_backward(weight, features, c.encoder_normalize, own_grad);
    grad_weight *= scale / divisor;
    if (!c.learnable_temperature) {
      gradient.add(grad_weight, {});
      continue;
    }
    // The inverse temperature is never detached: it sees the whole loss the
    // rank computed, every gathered row included (loss/learnable_temperature.hpp).
    gradient.add(grad_weight, {loss::inverse_temperature_gradient(embeddings, grad_embeddings,
                                                                  1.0 / c.loss.temperature)
                                   .value *
                               (scale / divisor)});
  }
  out.grad = gradient.reduce(comm, dp_group, strategy.reduction);
  return out;
}

template RankOutput<double> run_rank_program<double>(sim::Communicator&, const Case&,
                                                     const StepVariant&, SharedLosses<double>*);
template RankOutput<float> run_rank_program<float>(sim::Communicator&, const Case&,
                                                   const StepVariant&, SharedLosses<float>*);

}  // namespace infonce::step
