// Bounds of the rank programs' row and slot arithmetic, asserted where a row
// range is read or written (issue 30: a slip in the own rows' offset made the
// step read past the gradient, a ratio of 9.3e+179 that only luck caught).
// Eigen checks nothing in a release build; these stay on, as INFONCE_ASSERT
// does, and name the caller's file and line: an internal error, never garbage.
#pragma once

#include "base/assert.hpp"

// Rows [first, first + count) lie inside `rows` rows.
#define INFONCE_ASSERT_ROWS(first, count, rows) \
  INFONCE_ASSERT((first) >= 0 && (count) >= 0 && (first) <= (rows) - (count))

// `index` names one of `size` slots (a DP slot, a shard, a micro-step).
#define INFONCE_ASSERT_INDEX(index, size) INFONCE_ASSERT((index) >= 0 && (index) < (size))
