// infonce-sut/1's keys for issue 13 (docs/sut-protocol.md): the handshake's
// families, logit_bias and unequal_batches, what a SUT is sent of the new case
// keys, and the response's `direct` object; on hand-made cases and lines.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "properties/case_spec.hpp"
#include "properties/clip_case.hpp"
#include "properties/restriction.hpp"
#include "properties/siglip_case.hpp"
#include "properties/sut_step.hpp"
#include "sut/protocol.hpp"

namespace infonce::sut {
namespace {

Handshake handshake(const std::string& supports) {
  return parse_handshake(R"({"protocol": "infonce-sut/1", "name": "test", "supports": )" +
                         supports + "}");
}

Case clip_case(bool bias, std::vector<std::vector<std::int32_t>> groups_per_shard) {
  properties::CaseSpec spec;
  spec.world = static_cast<std::int32_t>(groups_per_shard.size());
  spec.dp = spec.world;
  spec.negatives = {{}};
  for (const auto& groups : groups_per_shard) spec.negatives[0].push_back(groups);
  spec.feature_dim = 2;
  spec.embedding_dim = 2;
  spec.include_qq = bias;  // the spec's axis for CLIP's logit bias (properties/clip_case.hpp)
  spec.data_seed = 5;
  return properties::build_clip_case(spec);
}

TEST(SutFamilies, TheHandshakeDeclaresFamiliesBiasAndBatches) {
  const Supports none = handshake("{}").supports;
  EXPECT_TRUE(none.infonce_family);
  EXPECT_FALSE(none.clip_family);
  EXPECT_FALSE(none.logit_bias);
  EXPECT_TRUE(none.unequal_batches);
  const Supports clip =
      handshake(R"({"families": ["clip"], "logit_bias": true, "unequal_batches": false})").supports;
  EXPECT_FALSE(clip.infonce_family);
  EXPECT_TRUE(clip.clip_family);
  EXPECT_TRUE(clip.logit_bias);
  EXPECT_FALSE(clip.unequal_batches);
  try {
    handshake(R"({"families": ["vicreg"]})");
    FAIL() << "accepted an unknown family";
  } catch (const ProtocolError& e) {
    EXPECT_NE(std::string(e.what()).find("handshake.supports.families[0]"), std::string::npos)
        << e.what();
  }
}

TEST(SutFamilies, ACaseOutsideTheFamiliesIsNamed) {
  const Case clip = clip_case(false, {{0}, {0}});
  EXPECT_EQ(outside_supports(clip, handshake(R"({"max_world": 2})").supports), "family clip");
  // The family key must be declared too: it is what the request carries.
  EXPECT_EQ(outside_supports(clip, handshake(R"({"families": ["clip"], "max_world": 2})").supports),
            "family clip");
  const Supports clip_only =
      handshake(R"({"families": ["clip"], "max_world": 2, "extension_keys": ["family"]})").supports;
  EXPECT_EQ(outside_supports(clip, clip_only), std::nullopt);
  EXPECT_EQ(outside_supports(clip_case(true, {{0}, {0}}), clip_only), "logit_bias");
  Supports equal_only = clip_only;
  equal_only.unequal_batches = false;
  EXPECT_EQ(outside_supports(clip, equal_only), std::nullopt);
  EXPECT_EQ(outside_supports(clip_case(false, {{0, 0}, {0}}), equal_only), "unequal batches");
  Case infonce = properties::build_case(properties::CaseSpec{});
  EXPECT_EQ(outside_supports(infonce, clip_only), "family infonce");
}

TEST(SutFamilies, OnlyDeclaredKeysAreSent) {
  Case c = properties::build_case(properties::CaseSpec{});
  c.learnable_temperature = true;
  c.strategy = Strategy{};
  const Supports plain = handshake("{}").supports;
  EXPECT_EQ(outside_supports(c, plain), "learnable_temperature");
  const std::string stripped = encode_request(0, c, plain);
  EXPECT_EQ(stripped.find("learnable_temperature"), std::string::npos) << stripped;
  EXPECT_EQ(stripped.find("strategy"), std::string::npos) << stripped;
  const Supports keys =
      handshake(R"({"extension_keys": ["learnable_temperature", "strategy"]})").supports;
  EXPECT_EQ(outside_supports(c, keys), std::nullopt);
  const std::string sent = encode_request(0, c, keys);
  EXPECT_NE(sent.find(R"("learnable_temperature":true)"), std::string::npos) << sent;
  EXPECT_NE(sent.find(R"("strategy":{"gather":"detached-own-live")"), std::string::npos) << sent;
}

TEST(SutFamilies, AResponseCarriesTheDirectParametersByName) {
  const Case clip = clip_case(true, {{0}});  // W = 1, D = 2, F = 2 + 2
  const std::string grad = R"("grad": [[1, 2, 3, 4], [5, 6, 7, 8]])";
  const Response ok =
      parse_response(R"({"id": 3, "losses": [0.5], )" + grad +
                         R"(, "direct": {"log_logit_scale": 0.25, "logit_bias": -1e-17}})",
                     3, clip);
  ASSERT_TRUE(ok.result.has_value());
  EXPECT_EQ(ok.result->direct, (std::vector<double>{0.25, -1e-17}));
  EXPECT_EQ(ok.result->grad(1, 3), 8.0);
  try {
    parse_response(
        R"({"id": 3, "losses": [0.5], )" + grad + R"(, "direct": {"log_logit_scale": 1}})", 3,
        clip);
    FAIL() << "accepted a response without the bias's gradient";
  } catch (const ProtocolError& e) {
    EXPECT_NE(std::string(e.what()).find("response.direct.logit_bias"), std::string::npos)
        << e.what();
  }
}

// SPEC section 15 on the channel: a SUT that runs only SigLIP gets SigLIP
// cases, sent with their family keys, and answers log_scale's and bias's
// gradients by name.
TEST(SutFamilies, ASigLipSutGetsSigLipCasesAndAnswersBothDirectParameters) {
  const Supports siglip_only =
      handshake(R"({"families": ["siglip"], "max_world": 4, "extension_keys": ["family"]})")
          .supports;
  EXPECT_TRUE(siglip_only.siglip_family);
  EXPECT_FALSE(siglip_only.infonce_family);
  const properties::Restriction r = properties::restriction_of(siglip_only);
  EXPECT_TRUE(r.siglip);
  properties::CaseSpec spec;
  spec.world = 2;
  spec.dp = 2;
  spec.negatives = {{{0}, {0, 0}}};
  spec.data_seed = 9;
  const Case c = properties::build_restricted_case(spec, r);
  ASSERT_TRUE(c.siglip.has_value());
  EXPECT_EQ(outside_supports(c, siglip_only), std::nullopt);
  EXPECT_EQ(outside_supports(c, handshake(R"({"families": ["siglip"], "max_world": 4})").supports),
            "family siglip");
  EXPECT_EQ(outside_supports(c, handshake(R"({"families": ["clip"], "max_world": 4,
                                              "extension_keys": ["family"]})")
                                    .supports),
            "family siglip");
  Supports equal_only = siglip_only;
  equal_only.unequal_batches = false;
  EXPECT_EQ(outside_supports(c, equal_only), "unequal batches");  // 1 and 2 pairs
  const std::string sent = encode_request(4, c, siglip_only);
  EXPECT_NE(sent.find(R"("family":"siglip")"), std::string::npos) << sent;
  EXPECT_NE(sent.find(R"("siglip":{"image_features")"), std::string::npos) << sent;
  const Response ok = parse_response(
      R"({"id": 4, "losses": [0.5, 0.5], "grad": )" +
          nlohmann::json(std::vector<std::vector<double>>(
                             static_cast<std::size_t>(c.embedding_dim()),
                             std::vector<double>(static_cast<std::size_t>(c.feature_dim()), 0.5)))
              .dump() +
          R"(, "direct": {"log_scale": 0.25, "bias": -0.75}})",
      4, c);
  ASSERT_TRUE(ok.result.has_value());
  EXPECT_EQ(ok.result->direct, (std::vector<double>{0.25, -0.75}));
}

}  // namespace
}  // namespace infonce::sut
