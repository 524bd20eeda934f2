#include "step/gather.hpp"

#include <cstring>

#include "base/assert.hpp"
#include "base/error.hpp"
#include "step/row_bounds.hpp"

namespace infonce::step {

template <class Scalar>
std::vector<std::byte> matrix_to_bytes(const Matrix<Scalar>& m) {
  const std::int64_t header[2] = {m.rows(), m.cols()};
  std::vector<std::byte> bytes(sizeof(header) +
                               sizeof(Scalar) * static_cast<std::size_t>(m.size()));
  std::memcpy(bytes.data(), header, sizeof(header));
  if (m.size() > 0)
    std::memcpy(bytes.data() + sizeof(header), m.data(), bytes.size() - sizeof(header));
  return bytes;
}

ShardView shard_from_bytes(std::span<const std::byte> bytes, std::size_t scalar_bytes) {
  std::int64_t header[2];
  INFONCE_ASSERT(bytes.size() >= sizeof(header));
  std::memcpy(header, bytes.data(), sizeof(header));
  INFONCE_ASSERT(header[0] >= 0 && header[1] >= 0);
  INFONCE_ASSERT(bytes.size() ==
                 sizeof(header) + scalar_bytes * static_cast<std::size_t>(header[0] * header[1]));
  return {header[0], header[1], bytes.data() + sizeof(header)};
}

GatheredObjectPair gather_object_pair(sim::Communicator& comm, const sim::Group& dp_group,
                                      std::span<const std::byte> matrix_bytes,
                                      const std::vector<std::uint8_t>& labels) {
  GatheredObjectPair out;
  out.matrices = comm.all_gather_object(dp_group, matrix_bytes);
  const std::span<const std::byte> label_bytes(reinterpret_cast<const std::byte*>(labels.data()),
                                               labels.size());
  out.labels = comm.all_gather_object(dp_group, label_bytes);
  return out;
}

std::vector<std::uint8_t> concatenated_labels(const sim::GatheredObjects& objects) {
  std::vector<std::uint8_t> labels;
  labels.reserve(objects.bytes().size());
  for (const auto& bytes : objects) {
    const auto* first = reinterpret_cast<const std::uint8_t*>(bytes.data());
    labels.insert(labels.end(), first, first + bytes.size());
  }
  return labels;
}

template <class Scalar>
Gathered<Scalar> from_objects(GatheredObjectPair pair) {
  Gathered<Scalar> out;
  out.objects = std::move(pair.matrices);
  out.shards.reserve(out.objects.size());
  for (const auto& bytes : out.objects)
    out.shards.push_back(shard_from_bytes(bytes, sizeof(Scalar)));
  out.labels = concatenated_labels(pair.labels);
  return out;
}

template <class Scalar>
Gathered<Scalar> gather_objects(sim::Communicator& comm, const sim::Group& dp_group,
                                const Matrix<Scalar>& local,
                                const std::vector<std::uint8_t>& labels) {
  return from_objects<Scalar>(gather_object_pair(comm, dp_group, matrix_to_bytes(local), labels));
}

GatherSlots gather_slots(const sim::Communicator& comm, const sim::Group& dp_group,
                         GatherGroup over, const Mesh& mesh) {
  if (over == GatherGroup::world) return {comm.world(), comm.world_rank()};
  return {dp_group, mesh.dp_rank(comm.world_rank())};
}

std::string own_slot_error(std::int32_t own_slot, std::size_t slots) {
  // The trainer's `all_sentences[rank] = sentences` raises IndexError here.
  return "own slot " + std::to_string(own_slot) + " is outside the " + std::to_string(slots) +
         " gathered shards (IndexError in the trainer)";
}

template <class Scalar>
Gathered<Scalar> gather_tensors(sim::Communicator& comm, const sim::Group& dp_group,
                                const Matrix<Scalar>& local,
                                const std::vector<std::uint8_t>& labels, bool gather_labels) {
  const std::int64_t my_shape[3] = {local.rows(), local.cols(),
                                    static_cast<std::int64_t>(labels.size())};
  const std::vector<std::int64_t> shapes = comm.all_gather(dp_group, std::span(my_shape));
  const std::int32_t members = dp_group.size();
  std::vector<std::int64_t> data_counts(members), label_counts(members);
  for (std::int32_t i = 0; i < members; ++i) {
    data_counts[i] = shapes[3 * i] * shapes[3 * i + 1];
    label_counts[i] = shapes[3 * i + 2];
  }
  Gathered<Scalar> out;
  out.values = comm.all_gather_v(
      dp_group, std::span<const Scalar>(local.data(), static_cast<std::size_t>(local.size())),
      data_counts);
  std::size_t cursor = 0;
  out.shards.reserve(static_cast<std::size_t>(members));
  for (std::int32_t i = 0; i < members; ++i) {
    out.shards.push_back({shapes[3 * i], shapes[3 * i + 1],
                          reinterpret_cast<const std::byte*>(out.values.data() + cursor)});
    cursor += static_cast<std::size_t>(data_counts[i]);
  }
  INFONCE_ASSERT(cursor == out.values.size());
  if (!gather_labels) {
    out.labels = labels;
    return out;
  }
  const std::vector<std::int64_t> wide(labels.begin(), labels.end());
  const std::vector<std::int64_t> gathered =
      comm.all_gather_v(dp_group, std::span(wide), label_counts);
  out.labels.assign(gathered.begin(), gathered.end());  // each label is 0 or 1
  return out;
}

template <class Scalar>
AssembledRows<Scalar> assemble_rows(const Gathered<Scalar>& gathered, const Matrix<Scalar>& local,
                                    std::int32_t own_slot) {
  const auto slots = static_cast<std::int32_t>(gathered.shards.size());
  if (own_slot >= slots) throw InputError(own_slot_error(own_slot, gathered.shards.size()));
  AssembledRows<Scalar> out;
  std::int64_t rows = 0;
  for (std::int32_t i = 0; i < slots; ++i) {
    if (i == own_slot) out.own_offset = rows;
    out.slot_rows.push_back(i == own_slot ? local.rows() : gathered.shards[i].rows);
    rows += out.slot_rows.back();
  }
  INFONCE_ASSERT_INDEX(own_slot, slots);
  out.rows.resize(rows, local.cols());
  std::int64_t row = 0;
  for (std::int32_t i = 0; i < slots; ++i) {
    const std::int64_t slot_rows = i == own_slot ? local.rows() : gathered.shards[i].rows;
    INFONCE_ASSERT_ROWS(row, slot_rows, out.rows.rows());
    if (i == own_slot) {
      out.rows.middleRows(row, local.rows()) = local;
      row += local.rows();
      continue;
    }
    const ShardView& shard = gathered.shards[i];
    if (shard.rows > 0) {
      INFONCE_ASSERT(shard.cols == local.cols());
      std::memcpy(out.rows.row(row).data(), shard.values,
                  sizeof(Scalar) * static_cast<std::size_t>(shard.rows * shard.cols));
    }
    row += shard.rows;
  }
  return out;
}

template <class Scalar>
AssembledRows<Scalar> gather_rows(sim::Communicator& comm, const sim::Group& dp_group,
                                  GatherPath path, const Matrix<Scalar>& local,
                                  std::int32_t own_slot) {
  Gathered<Scalar> gathered;
  if (path == GatherPath::object) {
    gathered.objects = comm.all_gather_object(dp_group, matrix_to_bytes(local));
    for (const auto& bytes : gathered.objects)
      gathered.shards.push_back(shard_from_bytes(bytes, sizeof(Scalar)));
  } else {
    gathered = gather_tensors(comm, dp_group, local, {}, false);
  }
  return assemble_rows(gathered, local, own_slot);
}

template <class Scalar>
Matrix<Scalar> own_rows_gradient(sim::Communicator& comm, const sim::Group& dp_group,
                                 GatherKind gather, const Matrix<Scalar>& grad_embeddings,
                                 const Matrix<Scalar>* query_rows,
                                 const std::vector<std::int64_t>& slot_rows,
                                 std::int64_t own_offset, std::int64_t own_rows,
                                 std::int32_t dp_rank) {
  // Whatever the gather, the own rows are one slot of the gathered rows.
  INFONCE_ASSERT_ROWS(own_offset, own_rows, grad_embeddings.rows());
  switch (gather) {
    case GatherKind::detached_own_live:
      return grad_embeddings.middleRows(own_offset, own_rows);
    case GatherKind::detached:
      if (query_rows != nullptr) {
        INFONCE_ASSERT(query_rows->rows() == grad_embeddings.rows());
        return query_rows->middleRows(own_offset, own_rows);
      }
      return Matrix<Scalar>::Zero(own_rows, grad_embeddings.cols());
    case GatherKind::autograd: {
      std::vector<std::int64_t> counts;
      for (const std::int64_t rows : slot_rows) counts.push_back(rows * grad_embeddings.cols());
      INFONCE_ASSERT(counts.size() == static_cast<std::size_t>(dp_group.size()));
      INFONCE_ASSERT_INDEX(dp_rank, dp_group.size());
      if (slot_rows[static_cast<std::size_t>(dp_rank)] != own_rows) {
        throw InputError("an autograd gather needs the rank's own rows in its DP slot");
      }
      const std::vector<Scalar> summed = comm.reduce_scatter_v(
          dp_group,
          std::span<const Scalar>(grad_embeddings.data(),
                                  static_cast<std::size_t>(grad_embeddings.size())),
          counts);
      INFONCE_ASSERT(static_cast<std::int64_t>(summed.size()) == own_rows * grad_embeddings.cols());
      return Eigen::Map<const Matrix<Scalar>>(summed.data(), own_rows, grad_embeddings.cols());
    }
  }
  INFONCE_ASSERT(false);
  return {};
}

#define INFONCE_INSTANTIATE(Scalar)                                                             \
  template std::vector<std::byte> matrix_to_bytes(const Matrix<Scalar>&);                       \
  template Gathered<Scalar> from_objects(GatheredObjectPair);                                   \
  template Gathered<Scalar> gather_objects(sim::Communicator&, const sim::Group&,               \
                                           const Matrix<Scalar>&,                               \
                                           const std::vector<std::uint8_t>&);                   \
  template Gathered<Scalar> gather_tensors(sim::Communicator&, const sim::Group&,               \
                                           const Matrix<Scalar>&,                               \
                                           const std::vector<std::uint8_t>&, bool);             \
  template AssembledRows<Scalar> assemble_rows(const Gathered<Scalar>&, const Matrix<Scalar>&,  \
                                               std::int32_t);                                   \
  template AssembledRows<Scalar> gather_rows(sim::Communicator&, const sim::Group&, GatherPath, \
                                             const Matrix<Scalar>&, std::int32_t);              \
  template Matrix<Scalar> own_rows_gradient(sim::Communicator&, const sim::Group&, GatherKind,  \
                                            const Matrix<Scalar>&, const Matrix<Scalar>*,       \
                                            const std::vector<std::int64_t>&, std::int64_t,     \
                                            std::int64_t, std::int32_t);

INFONCE_INSTANTIATE(float)
INFONCE_INSTANTIATE(double)

#undef INFONCE_INSTANTIATE

}  // namespace infonce::step
