// The gather of a rank program (MODEL.md section 3.2), shared by the loss
// families' rank programs: the all-gather of a rank's embedding rows over its
// DP group on the object path (gather_object, one serialized matrix per
// shard) or the tensor path (shapes first, then the data), the global batch
// assembled in slot order with the rank's own live rows in its slot, and the
// gradient the rank's own rows receive back by the gather kind of its
// strategy. Written against the Communicator interface only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "casefile/case.hpp"
#include "loss/matrix.hpp"
#include "sim/communicator.hpp"

namespace infonce::step {

// One gathered shard: its shape and its row-major values, inside the storage
// of the Gathered that holds it.
struct ShardView {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  const std::byte* values = nullptr;
};

// A matrix as the object gather sends it: rows, cols, then the values.
template <class Scalar>
std::vector<std::byte> matrix_to_bytes(const Matrix<Scalar>& m);
ShardView shard_from_bytes(std::span<const std::byte> bytes, std::size_t scalar_bytes);

// Per-shard embeddings (views, in DP-rank order) and labels. The rows are
// copied once, straight into the global batch (assemble).
template <class Scalar>
struct Gathered {
  sim::GatheredObjects objects;  // object path: the shards' serialized matrices
  std::vector<Scalar> values;    // tensor path: every shard's values
  std::vector<ShardView> shards;
  std::vector<std::uint8_t> labels;  // already flattened (or local only)
};

// Object path: gather_object(sentences.unsqueeze(0)) and gather_object(labels),
// each flattened one level: per-shard matrices, and the labels concatenated.
struct GatheredObjectPair {
  sim::GatheredObjects matrices;
  sim::GatheredObjects labels;
};

GatheredObjectPair gather_object_pair(sim::Communicator& comm, const sim::Group& dp_group,
                                      std::span<const std::byte> matrix_bytes,
                                      const std::vector<std::uint8_t>& labels);
std::vector<std::uint8_t> concatenated_labels(const sim::GatheredObjects& objects);
template <class Scalar>
Gathered<Scalar> from_objects(GatheredObjectPair pair);
template <class Scalar>
Gathered<Scalar> gather_objects(sim::Communicator& comm, const sim::Group& dp_group,
                                const Matrix<Scalar>& local,
                                const std::vector<std::uint8_t>& labels);
// Tensor path: all-gather the shapes (rows, D, label count), then the data
// into buffers of those shapes, then the labels (unless gather_labels is off).
template <class Scalar>
Gathered<Scalar> gather_tensors(sim::Communicator& comm, const sim::Group& dp_group,
                                const Matrix<Scalar>& local,
                                const std::vector<std::uint8_t>& labels, bool gather_labels);

// The group a strategy's gather runs over, and the rank's slot in it: its
// DP group and DP rank, or the world and its world rank (SPEC section 13).
struct GatherSlots {
  sim::Group group;
  std::int32_t own = 0;
};
GatherSlots gather_slots(const sim::Communicator& comm, const sim::Group& dp_group,
                         GatherGroup over, const Mesh& mesh);

// The message of the trainer's IndexError for an own slot past the shards.
std::string own_slot_error(std::int32_t own_slot, std::size_t slots);

// Every slot's rows in slot order, slot `own_slot` holding the live `local`.
template <class Scalar>
struct AssembledRows {
  Matrix<Scalar> rows;
  std::vector<std::int64_t> slot_rows;  // rows of each slot, in slot order
  std::int64_t own_offset = 0;          // the own slot's first row
};
template <class Scalar>
AssembledRows<Scalar> assemble_rows(const Gathered<Scalar>& gathered, const Matrix<Scalar>& local,
                                    std::int32_t own_slot);

// A matrix without labels (the CLIP towers' rows), gathered on `path` and
// assembled with the rank's live rows in slot `own_slot`.
template <class Scalar>
AssembledRows<Scalar> gather_rows(sim::Communicator& comm, const sim::Group& dp_group,
                                  GatherPath path, const Matrix<Scalar>& local,
                                  std::int32_t own_slot);

// `local` gathered over `group` (gather_rows) when `gather`; otherwise the
// rank's own rows as the only slot (no collective).
template <class Scalar>
AssembledRows<Scalar> local_or_gathered_rows(sim::Communicator& comm, const sim::Group& group,
                                             const Case& c, bool gather,
                                             const Matrix<Scalar>& local, std::int32_t own_slot) {
  if (gather) return gather_rows(comm, group, c.gather, local, own_slot);
  AssembledRows<Scalar> own;
  own.rows = local;
  own.slot_rows = {local.rows()};
  return own;
}

// The gradient the rank's own rows receive from its loss's dL/d(gathered
// rows), by the gather of its strategy:
// - detached-own-live: its own slot's gradient (every role of its rows);
// - detached: none under a global loss (every slot a constant); under a local
//   loss, its queries still come from its local tensor: only their share as
//   logit rows (`query_rows`);
// - autograd: the gather's backward, the reduce-scatter over the DP group of
//   every rank's gradient (member i: slot i summed over the ranks).
template <class Scalar>
Matrix<Scalar> own_rows_gradient(sim::Communicator& comm, const sim::Group& dp_group,
                                 GatherKind gather, const Matrix<Scalar>& grad_embeddings,
                                 const Matrix<Scalar>* query_rows,
                                 const std::vector<std::int64_t>& slot_rows,
                                 std::int64_t own_offset, std::int64_t own_rows,
                                 std::int32_t dp_rank);

// `m` in Scalar: itself when it already is, else cast into `storage`.
template <class Scalar>
const Matrix<Scalar>& as_scalar(const Matrix<double>& m, Matrix<Scalar>& storage) {
  if constexpr (std::is_same_v<Scalar, double>) {
    return m;
  } else {
    storage = m.template cast<Scalar>();
    return storage;
  }
}

}  // namespace infonce::step
