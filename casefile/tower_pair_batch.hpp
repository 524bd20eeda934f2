// One DP shard's micro-batch of a two-tower family (CLIP, SigLIP): n >= 1
// image-text pairs, row i of each matrix one pair. The image rows enter the
// image tower (the first F_image columns of Case::weight), the text rows the
// text tower (the rest).
#pragma once

#include "loss/matrix.hpp"

namespace infonce {

struct TowerPairBatch {
  Matrix<double> image;  // n x F_image
  Matrix<double> text;   // n x F_text
};

}  // namespace infonce
