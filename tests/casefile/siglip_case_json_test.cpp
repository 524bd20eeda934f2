// The SigLIP family's case keys (SPEC section 15): what parse_case reads from
// a SigLIP case, and the written form read back bit for bit.
#include <gtest/gtest.h>

#include "casefile/case.hpp"
#include "casefile/case_json.hpp"
#include "tests/casefile/bad_case_table.hpp"

namespace infonce {
namespace {

using testing::kValidSigLipCaseText;

TEST(SigLipCaseJson, ReadsEveryKey) {
  const Case c = parse_case(kValidSigLipCaseText);
  ASSERT_TRUE(c.siglip.has_value());
  EXPECT_FALSE(c.clip.has_value());
  EXPECT_FALSE(c.ntxent.has_value());
  EXPECT_EQ(c.mesh.world, 4);
  EXPECT_EQ(c.mesh.dp, 2);
  EXPECT_EQ(c.gather, GatherPath::tensor);
  EXPECT_EQ(c.embedding_dim(), 3);
  EXPECT_EQ(c.feature_dim(), 4);
  EXPECT_EQ(c.weight(1, 2), -0.6);  // the text tower's first column
  const SigLipSettings& s = *c.siglip;
  EXPECT_EQ(s.image_features, 2);
  EXPECT_TRUE(s.image_normalize);
  EXPECT_FALSE(s.text_normalize);
  EXPECT_EQ(s.log_scale, 1.2);
  EXPECT_EQ(s.bias, -1.5);
  ASSERT_EQ(s.batches.size(), 1u);
  ASSERT_EQ(s.batches[0].size(), 2u);
  EXPECT_EQ(s.batches[0][1].image(0, 1), 0.2);
  EXPECT_EQ(s.batches[0][1].text(1, 0), -0.4);
  EXPECT_EQ(direct_parameter_names(c), (std::vector<std::string>{"log_scale", "bias"}));
  EXPECT_EQ(direct_parameter_count(c), 2u);
}

TEST(SigLipCaseJson, WrittenFormReadsBackBitForBit) {
  Case c = parse_case(kValidSigLipCaseText);
  c.siglip->log_scale = 0.1 + 0.2;  // a double with no short decimal form
  c.siglip->batches[0][0].text(0, 1) = 1.0 / 3.0;
  const std::string written = case_to_json(c);
  EXPECT_NE(written.find("\"family\": \"siglip\""), std::string::npos);
  const Case back = parse_case(written);
  ASSERT_TRUE(back.siglip.has_value());
  EXPECT_EQ(back.weight, c.weight);
  EXPECT_EQ(back.siglip->image_features, c.siglip->image_features);
  EXPECT_EQ(back.siglip->text_normalize, c.siglip->text_normalize);
  EXPECT_EQ(back.siglip->log_scale, c.siglip->log_scale);
  EXPECT_EQ(back.siglip->bias, c.siglip->bias);
  EXPECT_EQ(back.siglip->batches[0][0].text, c.siglip->batches[0][0].text);
  EXPECT_EQ(back.siglip->batches[0][1].image, c.siglip->batches[0][1].image);
  EXPECT_EQ(case_to_json(back), written);
}

// The "siglip" object has exactly its six keys; "encoder" only the weight.
TEST(SigLipCaseJson, WritesExactlyTheFamilysKeys) {
  const auto document = nlohmann::json::parse(case_to_json(parse_case(kValidSigLipCaseText)));
  std::vector<std::string> keys;
  for (const auto& [key, value] : document.at("siglip").items()) keys.push_back(key);
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(keys, (std::vector<std::string>{"batches", "bias", "image_features", "image_normalize",
                                            "log_scale", "text_normalize"}));
  EXPECT_EQ(document.at("encoder").size(), 1u);
  EXPECT_FALSE(document.contains("loss"));
  EXPECT_FALSE(document.contains("rng"));
  EXPECT_FALSE(document.contains("batches"));
}

}  // namespace
}  // namespace infonce
