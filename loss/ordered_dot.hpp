// One summation order for every dot product that decides a result.
//
// Eigen picks product kernels (and with them the order of a sum) by matrix
// size and by the memory alignment of each row. The same two rows could then
// round differently in the batched and the loop path, or in one shard's
// matrix and in the union of all shards. At an exact tie with the
// fake-negative threshold (a duplicated row, a padded copy of the positive,
// collinear embeddings) one last bit flips the mask. Summing in index order
// makes every similarity and every embedding entry a pure function of its two
// rows: equal inputs give equal bits on every path, in every process.
#pragma once

#include <Eigen/Core>

namespace infonce::loss {

template <class Scalar, class Left, class Right>
Scalar ordered_dot(const Left& left, const Right& right) {
  Scalar sum = 0;
  for (Eigen::Index i = 0; i < left.size(); ++i) sum += left(i) * right(i);
  return sum;
}

// out(i, j) = ordered_dot(left.row(i), right.row(j)).
template <class Scalar, class Out, class Left, class Right>
void ordered_products(Out&& out, const Left& left, const Right& right) {
  for (Eigen::Index i = 0; i < left.rows(); ++i) {
    for (Eigen::Index j = 0; j < right.rows(); ++j) {
      out(i, j) = ordered_dot<Scalar>(left.row(i), right.row(j));
    }
  }
}

}  // namespace infonce::loss
