// mpi_make_cases DIR COUNT SEED [siglip]: writes COUNT generated case files
// for each of the meshes (world/DP) 2/2, 4/2, 4/4 and 8/4 into DIR, named
// w<W>d<P>-<i>.json. With `siglip`: SigLIP cases (SPEC section 15) of the
// same specs, each at a strategy point drawn from all 72 (its texts travel
// by a ring of point-to-point messages). Every axis the rank program branches on varies (micro-
// steps, groups, negatives, use_batch, hard negatives with both paddings,
// masking, qq/dd, reduction, gather path, per-rank generators, float32), so
// the MPI backend is compared with the fiber simulator on every code path.
// The files are a function of (COUNT, SEED) alone.
#include <cstdint>
#include <exception>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "base/concat.hpp"
#include "base/rng.hpp"
#include "casefile/case_json.hpp"
#include "properties/case_spec.hpp"
#include "properties/siglip_case.hpp"
#include "step/strategy.hpp"

namespace {

using infonce::Rng;
using infonce::properties::CaseSpec;

bool coin(Rng& rng, std::uint64_t percent) {
  return rng.below(100) < percent;
}

template <class T>
T pick(Rng& rng, const std::vector<T>& values) {
  return values[static_cast<std::size_t>(rng.below(values.size()))];
}

// Groups per shard and negatives per group, within what the trainer accepts:
// hard negatives need >= 1 negative per group; without use_batch every shard
// needs a group; with it, the whole batch does.
std::vector<std::vector<std::vector<std::int32_t>>> draw_negatives(Rng& rng, const CaseSpec& spec,
                                                                   std::int32_t micro_steps) {
  std::vector<std::vector<std::vector<std::int32_t>>> negatives(
      static_cast<std::size_t>(micro_steps));
  const std::int64_t fewest_negatives = spec.hard_negatives > 0 ? 1 : 0;
  for (auto& micro : negatives) {
    std::int64_t groups_in_step = 0;
    for (std::int32_t d = 0; d < spec.dp; ++d) {
      const std::int64_t groups = rng.between(spec.use_batch ? 0 : 1, 3);
      auto& shard = micro.emplace_back();
      for (std::int64_t g = 0; g < groups; ++g) {
        shard.push_back(static_cast<std::int32_t>(rng.between(fewest_negatives, 3)));
      }
      groups_in_step += groups;
    }
    if (groups_in_step == 0) micro[0].push_back(static_cast<std::int32_t>(rng.between(1, 2)));
  }
  return negatives;
}

CaseSpec draw_spec(Rng& rng, std::int32_t world, std::int32_t dp) {
  CaseSpec spec;
  spec.world = world;
  spec.dp = dp;
  spec.use_batch = coin(rng, 75);
  spec.hard_negatives = coin(rng, 30) ? static_cast<std::int32_t>(rng.between(1, 3)) : 0;
  spec.accumulation_normalize = coin(rng, 70);
  spec.feature_dim = static_cast<std::int32_t>(rng.between(1, 5));
  spec.embedding_dim = static_cast<std::int32_t>(rng.between(1, 5));
  spec.normalize = coin(rng, 80);
  spec.mask_fake_negative = coin(rng, 30);
  spec.fake_neg_margin = pick(rng, std::vector<double>{0.0, 0.1, 0.3});
  spec.include_qq = coin(rng, 40);
  spec.include_dd = coin(rng, 40);
  spec.temperature = pick(rng, std::vector<double>{0.05, 0.1, 0.5, 1.0});
  spec.reduction = coin(rng, 70) ? infonce::Reduction::mean : infonce::Reduction::sum;
  spec.gather = coin(rng, 50) ? infonce::GatherPath::object : infonce::GatherPath::tensor;
  spec.scalar = coin(rng, 80) ? infonce::ScalarType::float64 : infonce::ScalarType::float32;
  spec.data_seed = rng.next_u64();
  spec.rng_seed = rng.next_u64() >> 33;
  spec.negatives = draw_negatives(rng, spec, static_cast<std::int32_t>(rng.between(1, 3)));
  return spec;
}

// build_case gives the correct system; some cases take the trainer's
// settings that make ranks differ (legacy padding, per-rank generators), which
// must still agree between backends bit for bit.
infonce::Case draw_case(Rng& rng, std::int32_t world, std::int32_t dp) {
  infonce::Case c = infonce::properties::build_case(draw_spec(rng, world, dp));
  if (c.loss.hard_negatives && coin(rng, 40)) c.loss.padding = infonce::loss::Padding::legacy;
  if (c.loss.hard_negatives && coin(rng, 30)) c.rng_mode = infonce::RngMode::per_rank;
  c.compensate = coin(rng, 85);
  return c;
}

// A SigLIP case of the same spec at a point drawn from every strategy.
infonce::Case draw_siglip_case(Rng& rng, std::int32_t world, std::int32_t dp) {
  infonce::properties::CaseSpec spec = draw_spec(rng, world, dp);
  spec.use_batch = true;
  infonce::Case c = infonce::properties::build_siglip_case(spec);
  const auto points = infonce::step::all_strategies();
  c.strategy = points[static_cast<std::size_t>(rng.below(points.size()))];
  c.reduction = c.strategy->reduction;
  c.compensate = true;
  infonce::validate_case(c);
  return c;
}

std::string file_name(std::int32_t world, std::int32_t dp, std::int64_t index) {
  std::string number = std::to_string(index);
  number.insert(0, number.size() < 3 ? 3 - number.size() : 0, '0');
  return infonce::concat("w", std::to_string(world), "d", std::to_string(dp), "-", number, ".json");
}

}  // namespace

int main(int argc, char** argv) {
  const bool siglip = argc == 5 && std::string(argv[4]) == "siglip";
  if (argc != 4 && !siglip) {
    std::cerr << "usage: mpi_make_cases DIR COUNT SEED [siglip]\n";
    return 2;
  }
  try {
    const std::filesystem::path dir = argv[1];
    const std::int64_t count = std::stoll(argv[2]);
    Rng rng(std::stoull(argv[3]));
    std::filesystem::create_directories(dir);
    struct Mesh {
      std::int32_t world, dp;
    };
    std::int64_t written = 0;
    for (const Mesh mesh : {Mesh{2, 2}, Mesh{4, 2}, Mesh{4, 4}, Mesh{8, 4}}) {
      for (std::int64_t i = 0; i < count; ++i) {
        infonce::write_case_file(siglip ? draw_siglip_case(rng, mesh.world, mesh.dp)
                                        : draw_case(rng, mesh.world, mesh.dp),
                                 dir / file_name(mesh.world, mesh.dp, i));
        ++written;
      }
    }
    std::cout << "wrote " << written << " cases to " << dir.string() << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "mpi_make_cases: error: " << e.what() << "\n";
    return 2;
  }
}
