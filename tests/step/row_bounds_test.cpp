// The rank programs' row arithmetic is bounds-checked in every build type
// (step/row_bounds.hpp): a slip that points the own rows past the gathered
// gradient stops the process with its location instead of reading garbage
// (issue 30: a gradient ratio of 9.3e+179, caught only by luck).
#include <cstdio>

#include <gtest/gtest.h>

#include "sim/fiber_simulation.hpp"
#include "step/gather.hpp"
#include "step/row_bounds.hpp"

namespace infonce::step {
namespace {

// The own rows' gradient of a one-rank gather of 4 rows, read at `offset`.
void own_rows_at(std::int64_t offset, std::int64_t rows) {
  const Matrix<double> grad = Matrix<double>::Ones(4, 2);
  sim::SimulationOptions options;
  sim::run_fibers(options, [&](sim::Communicator& comm) {
    const sim::Group dp_group = comm.split(0, 0);
    const Matrix<double> own = own_rows_gradient<double>(
        comm, dp_group, GatherKind::detached_own_live, grad, nullptr, {4}, offset, rows, 0);
    // Used, so the read cannot be optimised away.
    if (!own.allFinite()) std::printf("not finite\n");
  });
}

TEST(RowBoundsDeathTest, OwnRowsPastTheGradientStopWithTheLocation) {
  own_rows_at(2, 2);  // the last two rows: in bounds
  EXPECT_DEATH(own_rows_at(3, 2), "gather\\.cpp:[0-9]+: assertion failed");
  EXPECT_DEATH(own_rows_at(-1, 1), "gather\\.cpp:[0-9]+: assertion failed");
}

TEST(RowBoundsDeathTest, TheMacrosNameTheCaller) {
  EXPECT_DEATH(INFONCE_ASSERT_ROWS(3, 2, 4), "row_bounds_test\\.cpp:[0-9]+: assertion failed");
  EXPECT_DEATH(INFONCE_ASSERT_INDEX(4, 4), "row_bounds_test\\.cpp:[0-9]+: assertion failed");
  INFONCE_ASSERT_ROWS(2, 2, 4);
  INFONCE_ASSERT_ROWS(4, 0, 4);
  INFONCE_ASSERT_INDEX(3, 4);
}

}  // namespace
}  // namespace infonce::step
