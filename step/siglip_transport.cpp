#include "step/siglip_transport.hpp"

#include <map>
#include <numeric>
#include <vector>

#include "base/assert.hpp"
#include "sim/ring.hpp"
#include "step/row_bounds.hpp"

namespace infonce::step {
namespace {

// One message of a ring schedule: the block at relative offset `block` (the
// rows that started `block` members back along the ring: 0 is the own, 1 the
// previous member's, -1 the next member's) sent one place in `direction`.
// The member on the other side sends its block at the same offset, which
// arrives here as offset block + 1 (to_next) or block - 1 (to_previous).
struct RingMessage {
  std::int32_t block = 0;
  sim::RingDirection direction = sim::RingDirection::to_next;
};
using RingStep = std::vector<RingMessage>;

std::int32_t arriving_block(const RingMessage& m) {
  return m.direction == sim::RingDirection::to_next ? m.block + 1 : m.block - 1;
}

sim::RingDirection reversed(sim::RingDirection d) {
  return d == sim::RingDirection::to_next ? sim::RingDirection::to_previous
                                          : sim::RingDirection::to_next;
}

// open_clip's schedules over P members: every other member's block arrives once.
std::vector<RingStep> ring_schedule(SigLipTransport transport, std::int32_t members) {
  std::vector<RingStep> steps;
  if (transport == SigLipTransport::shift) {
    for (std::int32_t s = 0; s + 1 < members; ++s) {
      steps.push_back({{s, sim::RingDirection::to_next}});
    }
    return steps;
  }
  INFONCE_ASSERT(transport == SigLipTransport::bidir);
  const std::int32_t bidir_steps = (members - 1) / 2;
  for (std::int32_t i = 0; i < bidir_steps; ++i) {
    steps.push_back({{i, sim::RingDirection::to_next}, {-i, sim::RingDirection::to_previous}});
  }
  if ((members - 1) % 2 == 1) steps.push_back({{bidir_steps, sim::RingDirection::to_next}});
  return steps;
}

std::int32_t slot_of_block(std::int32_t own_slot, std::int32_t block, std::int32_t members) {
  return ((own_slot - block) % members + members) % members;
}

// Every member's row count, in slot order (the ring's receive buffers need
// them, as the tensor path's shape exchange does).
std::vector<std::int64_t> member_rows(sim::Communicator& comm, const sim::Group& group,
                                      std::int64_t own_rows) {
  const std::vector<std::int64_t> ones(static_cast<std::size_t>(group.size()), 1);
  const std::array<std::int64_t, 1> mine{own_rows};
  return comm.all_gather_v(group, std::span<const std::int64_t>(mine), ones);
}

template <class Scalar>
std::span<const Scalar> values_of(const Matrix<Scalar>& m) {
  return {m.data(), static_cast<std::size_t>(m.size())};
}

// Row-major blocks: Matrix is row-major (loss/matrix.hpp), so a block's
// values are its rows one after another.
template <class Scalar>
Matrix<Scalar> received(sim::Communicator& comm, const sim::Group& group, std::int32_t peer,
                        std::int64_t rows, Eigen::Index cols) {
  Matrix<Scalar> out(rows, cols);
  comm.recv(group, peer, std::span<Scalar>(out.data(), static_cast<std::size_t>(out.size())));
  return out;
}

std::int32_t peer_of(const sim::Group& group, std::int32_t me, sim::RingDirection d) {
  const std::int32_t size = group.size();
  return d == sim::RingDirection::to_next ? (me + 1) % size : (me + size - 1) % size;
}

template <class Scalar>
AssembledRows<Scalar> assembled_from_blocks(const std::map<std::int32_t, Matrix<Scalar>>& blocks,
                                            const std::vector<std::int64_t>& slot_rows,
                                            std::int32_t own_slot, Eigen::Index cols) {
  const auto members = static_cast<std::int32_t>(slot_rows.size());
  AssembledRows<Scalar> out;
  out.slot_rows = slot_rows;
  out.rows.resize(std::accumulate(slot_rows.begin(), slot_rows.end(), std::int64_t{0}), cols);
  std::vector<std::int64_t> offsets(slot_rows.size(), 0);
  std::partial_sum(slot_rows.begin(), slot_rows.end() - 1, offsets.begin() + 1);
  for (const auto& [block, rows] : blocks) {
    const std::int32_t slot = slot_of_block(own_slot, block, members);
    INFONCE_ASSERT(rows.rows() == slot_rows[static_cast<std::size_t>(slot)]);
    out.rows.middleRows(offsets[static_cast<std::size_t>(slot)], rows.rows()) = rows;
  }
  out.own_offset = offsets[static_cast<std::size_t>(own_slot)];
  return out;
}

template <class Scalar>
AssembledRows<Scalar> ring_rows(sim::Communicator& comm, const sim::Group& group,
                                SigLipTransport transport, const Matrix<Scalar>& local,
                                std::int32_t own_slot) {
  const std::vector<std::int64_t> slot_rows = member_rows(comm, group, local.rows());
  const std::int32_t members = group.size();
  std::map<std::int32_t, Matrix<Scalar>> blocks{{0, local}};
  for (const RingStep& step : ring_schedule(transport, members)) {
    for (const RingMessage& m : step) {
      comm.send(group, peer_of(group, own_slot, m.direction), values_of(blocks.at(m.block)));
    }
    for (const RingMessage& m : step) {
      const std::int32_t block = arriving_block(m);
      const std::int32_t slot = slot_of_block(own_slot, block, members);
      INFONCE_ASSERT(!blocks.contains(block));
      blocks[block] = received<Scalar>(comm, group, peer_of(group, own_slot, reversed(m.direction)),
                                       slot_rows[static_cast<std::size_t>(slot)], local.cols());
    }
  }
  INFONCE_ASSERT(static_cast<std::int32_t>(blocks.size()) == members);
  return assembled_from_blocks(blocks, slot_rows, own_slot, local.cols());
}

// open_clip's reduce: for every member i, an all-reduce (sum) of the rows
// masked to member i's (zeros elsewhere).
template <class Scalar>
AssembledRows<Scalar> reduced_rows(sim::Communicator& comm, const sim::Group& group,
                                   const Matrix<Scalar>& local, std::int32_t own_slot) {
  const std::vector<std::int64_t> slot_rows = member_rows(comm, group, local.rows());
  std::map<std::int32_t, Matrix<Scalar>> blocks;
  for (std::int32_t i = 0; i < group.size(); ++i) {
    Matrix<Scalar> masked =
        i == own_slot ? local
                      : Matrix<Scalar>::Zero(slot_rows[static_cast<std::size_t>(i)], local.cols());
    comm.all_reduce(group,
                    std::span<Scalar>(masked.data(), static_cast<std::size_t>(masked.size())),
                    sim::ReduceOp::sum);
    // The own block stays the live local rows (torch: the rank's own term
    // uses them; the all-reduced copy of its own is weighted 0).
    blocks[own_slot - i] = i == own_slot ? local : masked;
  }
  return assembled_from_blocks(blocks, slot_rows, own_slot, local.cols());
}

template <class Scalar>
Matrix<Scalar> ring_backward(sim::Communicator& comm, const sim::Group& group,
                             SigLipTransport transport, const Matrix<Scalar>& grad_rows,
                             const std::vector<std::int64_t>& slot_rows, std::int32_t own_slot) {
  const std::int32_t members = group.size();
  std::vector<std::int64_t> offsets(slot_rows.size(), 0);
  std::partial_sum(slot_rows.begin(), slot_rows.end() - 1, offsets.begin() + 1);
  // Each block held starts with this member's own share of its gradient.
  std::map<std::int32_t, Matrix<Scalar>> grads;
  const auto share = [&](std::int32_t block) {
    const auto slot = static_cast<std::size_t>(slot_of_block(own_slot, block, members));
    return Matrix<Scalar>(grad_rows.middleRows(offsets[slot], slot_rows[slot]));
  };
  grads[0] = share(0);
  const std::vector<RingStep> steps = ring_schedule(transport, members);
  for (const RingStep& step : steps) {
    for (const RingMessage& m : step) grads[arriving_block(m)] = share(arriving_block(m));
  }
  // The forward's messages in reverse: a received block's gradient (its own
  // share plus whatever came back for forwarding it) returns to its sender.
  for (auto step = steps.rbegin(); step != steps.rend(); ++step) {
    for (const RingMessage& m : *step) {
      comm.send(group, peer_of(group, own_slot, reversed(m.direction)),
                values_of(grads.at(arriving_block(m))));
    }
    for (const RingMessage& m : *step) {
      Matrix<Scalar>& target = grads.at(m.block);
      target += received<Scalar>(comm, group, peer_of(group, own_slot, m.direction), target.rows(),
                                 target.cols());
    }
  }
  return grads.at(0);
}

// The backward of the masked all-reduces: all-reduce every slot's gradient;
// member i keeps slot i's (the mask).
template <class Scalar>
Matrix<Scalar> reduce_backward(sim::Communicator& comm, const sim::Group& group,
                               const Matrix<Scalar>& grad_rows,
                               const std::vector<std::int64_t>& slot_rows, std::int32_t own_slot) {
  Matrix<Scalar> own;
  std::int64_t offset = 0;
  for (std::int32_t i = 0; i < group.size(); ++i) {
    const std::int64_t rows = slot_rows[static_cast<std::size_t>(i)];
    Matrix<Scalar> block = grad_rows.middleRows(offset, rows);
    comm.all_reduce(group, std::span<Scalar>(block.data(), static_cast<std::size_t>(block.size())),
                    sim::ReduceOp::sum);
    if (i == own_slot) own = std::move(block);
    offset += rows;
  }
  return own;
}

}  // namespace

template <class Scalar>
AssembledRows<Scalar> exchange_rows(sim::Communicator& comm, const sim::Group& group,
                                    SigLipTransport transport, GatherPath path,
                                    const Matrix<Scalar>& local, std::int32_t own_slot) {
  switch (transport) {
    case SigLipTransport::gather:
      return gather_rows(comm, group, path, local, own_slot);
    case SigLipTransport::reduce:
      return reduced_rows(comm, group, local, own_slot);
    case SigLipTransport::bidir:
    case SigLipTransport::shift:
      return ring_rows(comm, group, transport, local, own_slot);
  }
  INFONCE_ASSERT(false);
  return {};
}

template <class Scalar>
Matrix<Scalar> returned_gradient(sim::Communicator& comm, const sim::Group& group,
                                 SigLipTransport transport, const Matrix<Scalar>& grad_rows,
                                 const std::vector<std::int64_t>& slot_rows,
                                 std::int32_t own_slot) {
  INFONCE_ASSERT(static_cast<std::int32_t>(slot_rows.size()) == group.size());
  INFONCE_ASSERT_INDEX(own_slot, group.size());
  switch (transport) {
    case SigLipTransport::gather: {
      const std::int64_t own_offset =
          std::accumulate(slot_rows.begin(), slot_rows.begin() + own_slot, std::int64_t{0});
      return own_rows_gradient(comm, group, GatherKind::autograd, grad_rows,
                               static_cast<const Matrix<Scalar>*>(nullptr), slot_rows, own_offset,
                               slot_rows[static_cast<std::size_t>(own_slot)], own_slot);
    }
    case SigLipTransport::reduce:
      return reduce_backward(comm, group, grad_rows, slot_rows, own_slot);
    case SigLipTransport::bidir:
    case SigLipTransport::shift:
      return ring_backward(comm, group, transport, grad_rows, slot_rows, own_slot);
  }
  INFONCE_ASSERT(false);
  return {};
}

#define INFONCE_INSTANTIATE(Scalar)                                                                \
  template AssembledRows<Scalar> exchange_rows(sim::Communicator&, const sim::Group&,              \
                                               SigLipTransport, GatherPath, const Matrix<Scalar>&, \
                                               std::int32_t);                                      \
  template Matrix<Scalar> returned_gradient(sim::Communicator&, const sim::Group&,                 \
                                            SigLipTransport, const Matrix<Scalar>&,                \
                                            const std::vector<std::int64_t>&, std::int32_t);

INFONCE_INSTANTIATE(float)
INFONCE_INSTANTIATE(double)

#undef INFONCE_INSTANTIATE

}  // namespace infonce::step
