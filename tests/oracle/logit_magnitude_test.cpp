// oracle/logit_magnitude.hpp on numbers worked by hand.
#include "oracle/logit_magnitude.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace infonce::oracle {
namespace {

TEST(LogitMagnitude, CountsTheTermsOfACancellingEncodingNotItsValue) {
  RealRows weight(2, 2);
  weight << 1, -1, 2, 0;
  RealRows sentence(1, 2);
  sentence << 1, 1;  // W x = (0, 2), |W| |x| = (2, 2)
  const RealRows plain = encoding_magnitude(weight, sentence, false);
  EXPECT_EQ(plain(0, 0), 2);
  EXPECT_EQ(plain(0, 1), 2);
  const RealRows normalized = encoding_magnitude(weight, sentence, true);  // over |W x| = 2
  EXPECT_EQ(normalized(0, 0), 1);
  EXPECT_EQ(normalized(0, 1), 1);
}

TEST(LogitMagnitude, TakesTheLargestPairWithTheBiasAsItsSize) {
  RealRows image(2, 2);
  image << 2, 2, 1, 0;
  RealRows text(1, 2);
  text << 3, 3;
  // 2 (2 * 3 + 2 * 3) + |-1| = 25 for image row 0; 2 * 3 + 1 = 7 for row 1.
  EXPECT_EQ(max_logit_magnitude(image, text, 2, -1), 25);
  EXPECT_EQ(max_logit_magnitude(image.bottomRows(1), text, 2, -1), 7);
}

}  // namespace
}  // namespace infonce::oracle
