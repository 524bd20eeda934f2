#include "properties/strategy_families.hpp"

#include "base/assert.hpp"
#include "properties/clip_case.hpp"
#include "properties/ntxent_case.hpp"
#include "properties/siglip_case.hpp"

namespace infonce::properties {
namespace {

const StrategyFamily kFamilies[] = {
    {"infonce", FamilyChoice::infonce, "", describe, &StrategyCampaignResult::cells},
    {"clip", FamilyChoice::clip, "-clip", describe_clip, &StrategyCampaignResult::clip_cells},
    {"ntxent", FamilyChoice::ntxent, "-ntxent", describe_ntxent,
     &StrategyCampaignResult::ntxent_cells},
    {"siglip", FamilyChoice::siglip, "-siglip", describe_siglip,
     &StrategyCampaignResult::siglip_cells},
};

}  // namespace

std::span<const StrategyFamily> strategy_families() {
  return kFamilies;
}

const StrategyFamily& strategy_family(FamilyChoice choice) {
  for (const StrategyFamily& family : kFamilies) {
    if (family.choice == choice) return family;
  }
  INFONCE_ASSERT(!"a single family");
  return kFamilies[0];
}

}  // namespace infonce::properties
