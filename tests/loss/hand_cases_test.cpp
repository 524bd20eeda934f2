// (f) Tiny cases worked out by hand: 1-D embeddings, so every similarity is a
// product of two numbers. Each test checks both code paths where they apply.
#include <gtest/gtest.h>

#include <cmath>

#include "support.hpp"

namespace infonce::loss::testing {
namespace {

Matrix<double> column(std::initializer_list<double> values) {
  Matrix<double> m(static_cast<Eigen::Index>(values.size()), 1);
  Eigen::Index i = 0;
  for (const double v : values) m(i++, 0) = v;
  return m;
}

GroupLayout layout_of(std::vector<std::int32_t> negatives) {
  std::int32_t rows = 0;
  for (const auto k : negatives) rows += k + 2;
  return parse_groups(labels_for_negative_counts(negatives), rows);
}

void expect_case(const Matrix<double>& e, const GroupLayout& layout, const LossSettings& settings,
                 double loss, std::initializer_list<double> grad) {
  for (const CodePath path : applicable_paths(layout)) {
    const auto result = infonce_loss_and_gradient(e, layout, settings, path);
    EXPECT_NEAR(result.loss, loss, 1e-15) << path_name(path);
    Eigen::Index i = 0;
    for (const double g : grad) {
      EXPECT_NEAR(result.grad_embeddings(i, 0), g, 1e-15) << path_name(path) << " row " << i;
      ++i;
    }
  }
}

// use_batch = false, T = 1. Rows [q0 p0 n0 | q1 p1] = [1 2 0 | 2 1].
//   group 0: logits q0.[p0, n0] = [2, 0], target 0:
//            CE0 = log(e^2 + e^0) - 2 = log(1 + e^-2) = 0.126928011042972...
//   group 1: logits [2], target 0: CE1 = log(e^2) - 2 = 0, softmax [1]: no gradient.
//   L = (CE0 + CE1) / 2 = log(1 + e^-2) / 2 = 0.0634640055214863.
//   dL/dlogits of group 0 = ([s, 1-s] - [1, 0]) / 2, s = e^2 / (e^2 + 1) = 0.8807970779778823:
//     dq0 = (s-1)/2 * p0 + (1-s)/2 * n0 = (s-1)/2 * 2 + 0 = s - 1 = -0.11920292202211769
//     dp0 = (s-1)/2 * q0 = -0.05960146101105884
//     dn0 = (1-s)/2 * q0 = +0.05960146101105884
TEST(HandCases, WithinGroupsTwoGroups) {
  LossSettings settings;
  settings.use_batch = false;
  settings.temperature = 1.0;
  const double s = std::exp(2.0) / (std::exp(2.0) + 1.0);
  EXPECT_NEAR(s, 0.8807970779778823, 1e-15);
  expect_case(column({1, 2, 0, 2, 1}), layout_of({1, 0}), settings, 0.0634640055214863,
              {-0.11920292202211769, -0.05960146101105884, 0.05960146101105884, 0, 0});
}

// use_batch, include_qq, mask with margin 0.5, T = 1. Rows [q0 p0 | q1 p1] = [1 1 | 2 -1].
//   docs = [p0, p1] = [1, -1]; targets t0 = 0, t1 = 1.
//   row 0: qd = q0.docs = [1, -1]; h0 = qd[0] + 0.5 = 1.5; qq = [-inf (self), q0.q1 = 2];
//          2 > 1.5 masks it: logits [1, -1, -inf, -inf].
//          CE0 = log(e + e^-1) - 1 = log(1 + e^-2).
//   row 1: qd = q1.docs = [2, -2]; h1 = qd[1] + 0.5 = -1.5; 2 > -1.5 masked, the target -2 is
//          not; qq = [q1.q0 = 2 > -1.5 masked, -inf (self)]: logits [-inf, -2, -inf, -inf].
//          CE1 = log(e^-2) + 2 = 0, softmax [0, 1, 0, 0] = onehot: no gradient.
//   L = log(1 + e^-2) / 2 = 0.0634640055214863.
//   Row 0 gradient dL/dlogits = ([s, 1-s, 0, 0] - [1, 0, 0, 0]) / 2, s = 1 / (1 + e^-2):
//     dq0 = (s-1)/2 * p0 + (1-s)/2 * p1 = (s-1)/2 - (1-s)/2 = s - 1 = -0.11920292202211769
//     dp0 = (s-1)/2 * q0 = -0.05960146101105884,  dp1 = (1-s)/2 * q0 = +0.05960146101105884
//     dq1 = 0 (its qq entry is masked; its own row has no gradient).
TEST(HandCases, AcrossGroupsWithQqAndMask) {
  LossSettings settings;
  settings.temperature = 1.0;
  settings.include_qq = true;
  settings.mask_fake_negative = true;
  settings.fake_neg_margin = 0.5;
  expect_case(column({1, 1, 2, -1}), layout_of({0, 0}), settings, 0.0634640055214863,
              {-0.11920292202211769, -0.05960146101105884, 0, 0.05960146101105884});
}

// use_batch, include_dd, T = 2. Rows [q0 p0 n0 | q1 p1 n1] = [1 1 -1 | -1 1 0].
//   docs = [p0 n0 p1 n1] = [1 -1 1 0]; targets t0 = 0, t1 = 2.
//   row 0: qd = [1 -1 1 0]; dd = p0.docs with column t0 = -inf: [-inf -1 1 0].
//          logits / 2 = [.5 -.5 .5 0 | -inf -.5 .5 0]
//          Z0 = 3e^.5 + 2e^-.5 + 2, CE0 = log Z0 - .5
//   row 1: qd = [-1 1 -1 0]; dd = p1.docs with column t1 = -inf: [1 -1 -inf 0].
//          logits / 2 = [-.5 .5 -.5 0 | .5 -.5 -inf 0]
//          Z1 = 2e^.5 + 3e^-.5 + 2, CE1 = log Z1 + .5
//   L = (CE0 + CE1) / 2 = 2.0308201719172576.
//   dL/dsimilarity = (softmax - onehot) / (B T) = (softmax - onehot) / 4:
//     dq0 = 1/4 [(e^.5/Z0 - 1)(1) + (e^-.5/Z0)(-1) + (e^.5/Z0)(1) + (1/Z0)(0)]
//         = 1/4 [(2e^.5 - e^-.5)/Z0 - 1] = -0.16755001736346062
//     dq1 = 1/4 [(e^-.5/Z1)(1) + (e^.5/Z1)(-1) + (e^-.5/Z1 - 1)(1)]
//         = 1/4 [(2e^-.5 - e^.5)/Z1 - 1] = -0.26530342272535157
//     dn1 (docs column 3, logit 0 in all four blocks it appears in):
//         qd: (1/Z0) q0 + (1/Z1) q1 = 1/Z0 - 1/Z1; dd: (1/Z0) p0 + (1/Z1) p1 = 1/Z0 + 1/Z1
//         dn1 = 1/4 (2/Z0) = 0.06128032894546538
TEST(HandCases, AcrossGroupsWithDdAndTemperature) {
  LossSettings settings;
  settings.temperature = 2.0;
  settings.include_dd = true;
  const Matrix<double> e = column({1, 1, -1, -1, 1, 0});
  const GroupLayout layout = layout_of({1, 1});
  for (const CodePath path : {CodePath::batched, CodePath::loop}) {
    const auto result = infonce_loss_and_gradient(e, layout, settings, path);
    EXPECT_NEAR(result.loss, 2.0308201719172576, 1e-15);
    EXPECT_NEAR(result.grad_embeddings(0, 0), -0.16755001736346062, 1e-15);
    EXPECT_NEAR(result.grad_embeddings(3, 0), -0.26530342272535157, 1e-15);
    EXPECT_NEAR(result.grad_embeddings(5, 0), 0.06128032894546538, 1e-15);
  }
}

// Masking compares raw similarities, before / T. Same rows as the qq case,
// T = 0.5, margin 1.5:
//   row 0: raw qd = [1, -1], h0 = 1 + 1.5 = 2.5; raw qq entry 2 > 2.5 is false: kept.
//          (Comparing after / T would mask it: 4 > 2 + 1.5.)
//          logits = [1, -1, -inf, 2] / 0.5 = [2, -2, -inf, 4], CE0 = log(e^2 + e^-2 + e^4) - 2.
//   row 1: raw qd = [2, -2], h1 = -2 + 1.5 = -0.5: 2 masked, the target -2 kept; qq 2 masked.
//          CE1 = 0.
//   L = CE0 / 2 = 1.0645544544149255.
TEST(HandCases, MaskingComparesRawSimilarities) {
  LossSettings settings;
  settings.temperature = 0.5;
  settings.include_qq = true;
  settings.mask_fake_negative = true;
  settings.fake_neg_margin = 1.5;
  const double ce0 = std::log(std::exp(2.0) + std::exp(-2.0) + std::exp(4.0)) - 2.0;
  EXPECT_NEAR(ce0 / 2, 1.0645544544149255, 1e-15);
  for (const CodePath path : {CodePath::batched, CodePath::loop}) {
    EXPECT_NEAR(infonce_loss(column({1, 1, 2, -1}), layout_of({0, 0}), settings, path),
                1.0645544544149255, 1e-15);
  }
}

}  // namespace
}  // namespace infonce::loss::testing
