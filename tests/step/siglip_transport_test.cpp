// The SigLIP transports alone (step/siglip_transport.hpp), on rows whose
// values name their owner, over groups of 1 to 7 members (bidir with and
// without its last shift) under random fiber schedules: every member holds
// every member's rows in slot order, and the autograd backward hands each
// member exactly the sum of every member's share for its rows, whatever the
// way the shares travelled. Expected values are written from the row labels
// here, not computed by the transports.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "sim/fiber_simulation.hpp"
#include "step/siglip_transport.hpp"

namespace infonce::step {
namespace {

constexpr std::array<SigLipTransport, 4> kTransports{SigLipTransport::bidir, SigLipTransport::shift,
                                                     SigLipTransport::reduce,
                                                     SigLipTransport::gather};

// Member m holds m % 3 + 1 rows of 2 columns: row r, column c = 100 m + 10 r + c.
Matrix<double> rows_of(std::int32_t member) {
  Matrix<double> out(member % 3 + 1, 2);
  for (Eigen::Index r = 0; r < out.rows(); ++r) {
    for (Eigen::Index c = 0; c < 2; ++c) out(r, c) = 100.0 * member + 10.0 * r + c;
  }
  return out;
}

// What member `from` says of slot `slot`'s rows: a power of two per sender,
// so every sum over a set of senders is exact and names the set.
double share(std::int32_t from, std::int32_t slot, Eigen::Index r, Eigen::Index c) {
  return std::ldexp(1.0, from) * (1.0 + slot + 0.25 * static_cast<double>(r) + 0.125 * c);
}

TEST(SigLipTransport, EveryMemberGetsEveryRowAndItsRowsSummedGradient) {
  for (std::int32_t members = 1; members <= 7; ++members) {
    for (const SigLipTransport transport : kTransports) {
      for (const std::uint64_t seed : {1, 2, 3}) {
        SCOPED_TRACE(::testing::Message() << members << " members, transport "
                                          << static_cast<int>(transport) << ", seed " << seed);
        sim::SimulationOptions options;
        options.world_size = members;
        options.schedule = {sim::ScheduleKind::random, seed};
        sim::run_fibers(options, [&](sim::Communicator& comm) {
          const sim::Group world = comm.world();
          const std::int32_t me = comm.world_rank();
          const AssembledRows<double> all =
              exchange_rows(comm, world, transport, GatherPath::tensor, rows_of(me), me);
          std::int64_t offset = 0;
          for (std::int32_t slot = 0; slot < members; ++slot) {
            const Matrix<double> want = rows_of(slot);
            ASSERT_EQ(all.slot_rows[static_cast<std::size_t>(slot)], want.rows());
            EXPECT_EQ(Matrix<double>(all.rows.middleRows(offset, want.rows())), want);
            if (slot == me) {
              EXPECT_EQ(all.own_offset, offset);
            }
            offset += want.rows();
          }
          // This member's gradient of every slot's rows.
          Matrix<double> grad(all.rows.rows(), 2);
          offset = 0;
          for (std::int32_t slot = 0; slot < members; ++slot) {
            for (Eigen::Index r = 0; r < all.slot_rows[static_cast<std::size_t>(slot)]; ++r) {
              for (Eigen::Index c = 0; c < 2; ++c) grad(offset + r, c) = share(me, slot, r, c);
            }
            offset += all.slot_rows[static_cast<std::size_t>(slot)];
          }
          const Matrix<double> back =
              returned_gradient(comm, world, transport, grad, all.slot_rows, me);
          ASSERT_EQ(back.rows(), rows_of(me).rows());
          for (Eigen::Index r = 0; r < back.rows(); ++r) {
            for (Eigen::Index c = 0; c < 2; ++c) {
              // sum over members f of 2^f x (...): (2^members - 1) x (...).
              EXPECT_EQ(back(r, c), (std::ldexp(1.0, members) - 1) * share(0, me, r, c));
            }
          }
          comm.check_messages_delivered();
        });
      }
    }
  }
}

}  // namespace
}  // namespace infonce::step
