// Random programs of collectives over changing groups (world, DP groups of a
// mesh, split groups): every rank's results are bit-identical under FIFO and
// several random schedules, and equal to a sequential model of the program.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <map>
#include <ostream>
#include <tuple>

#include "base/rng.hpp"
#include "sim/determinism.hpp"
#include "sim/mesh.hpp"
#include "tests/rapidcheck_seed.hpp"
#include "tests/sim/sim_test_support.hpp"

namespace infonce::sim {
namespace {

using testing::record;
using testing::record_value;

enum class Op {
  all_gather,
  all_gather_v,
  all_gather_object,
  all_reduce_sum,
  all_reduce_mean,
  broadcast,
  barrier,
  split,
  use_world,
  use_mesh,
  reduce_scatter_v
};

struct Step {
  Op op = Op::barrier;
  std::int32_t count = 0;  // values per member where counts agree
  std::uint64_t seed = 0;  // inputs, counts, colors, keys, root
  std::int32_t dp = 1;     // use_mesh
  bool single = false;     // float instead of double
};

struct ProgramSpec {
  std::int32_t world = 1;
  std::vector<Step> steps;
};

void showValue(const ProgramSpec& spec, std::ostream& os) {
  os << "world " << spec.world << ", steps:";
  for (const Step& s : spec.steps) {
    os << " (op " << static_cast<int>(s.op) << " count " << s.count << " seed " << s.seed << " dp "
       << s.dp << (s.single ? " f32" : "") << ")";
  }
}

rc::Gen<ProgramSpec> gen_program() {
  return rc::gen::exec([] {
    ProgramSpec spec;
    spec.world = *rc::gen::inRange(1, 11);
    std::vector<std::int32_t> divisors;
    for (std::int32_t d = 1; d <= spec.world; ++d) {
      if (spec.world % d == 0) divisors.push_back(d);
    }
    const auto length = *rc::gen::inRange(1, 13);
    for (int i = 0; i < length; ++i) {
      Step step;
      step.op = static_cast<Op>(*rc::gen::inRange(0, 11));
      step.count = *rc::gen::inRange(0, 5);
      step.seed = *rc::gen::arbitrary<std::uint64_t>();
      step.dp = *rc::gen::elementOf(divisors);
      step.single = *rc::gen::arbitrary<bool>();
      spec.steps.push_back(step);
    }
    return spec;
  });
}

// ---- What each rank contributes (shared by the program and the model) ----

Rng rng_of(const Step& step, std::int32_t w, std::uint64_t stream) {
  return Rng(derive_seed(derive_seed(step.seed, stream), static_cast<std::uint64_t>(w)));
}

template <class T>
std::vector<T> values_of(const Step& step, std::int32_t w, std::int64_t count) {
  Rng rng = rng_of(step, w, 1);
  std::vector<T> values(static_cast<std::size_t>(count));
  for (T& v : values) v = static_cast<T>(rng.between(-100000, 100000)) / static_cast<T>(7);
  return values;
}

std::int64_t gather_v_count(const Step& step, std::int32_t w) {
  return static_cast<std::int64_t>(rng_of(step, w, 2).below(4));
}

std::vector<std::byte> object_of(const Step& step, std::int32_t w) {
  Rng rng = rng_of(step, w, 3);
  std::vector<std::byte> bytes(rng.below(9));
  for (std::byte& b : bytes) b = static_cast<std::byte>(rng.below(256));
  return bytes;
}

std::int32_t color_of(const Step& step, std::int32_t w) {
  return static_cast<std::int32_t>(rng_of(step, w, 4).between(-1, 2));
}

std::int32_t key_of(const Step& step, std::int32_t w) {
  return static_cast<std::int32_t>(rng_of(step, w, 5).between(-2, 2));
}

std::int32_t root_of(const Step& step, const Group& group) {
  return static_cast<std::int32_t>(step.seed % static_cast<std::uint64_t>(group.size()));
}

void record_group(std::vector<std::byte>& out, const Group& group) {
  record_value(out, group.id);
  record_value(out, group.size());
  record<std::int32_t>(out, group.world_ranks);
}

// ---- The program, run by every rank against the communicator ----

template <class T>
void run_numeric(Communicator& comm, const Step& step, const Group& group,
                 std::vector<std::byte>& out) {
  const std::int32_t w = comm.world_rank();
  switch (step.op) {
    case Op::all_gather: {
      const auto mine = values_of<T>(step, w, step.count);
      record<T>(out, comm.all_gather(group, std::span<const T>(mine)));
      return;
    }
    case Op::all_gather_v: {
      std::vector<std::int64_t> counts;
      for (const std::int32_t member : group.world_ranks)
        counts.push_back(gather_v_count(step, member));
      const auto mine = values_of<T>(step, w, gather_v_count(step, w));
      record<T>(out, comm.all_gather_v(group, std::span<const T>(mine), counts));
      return;
    }
    default:
      break;
  }
  if constexpr (!std::is_same_v<T, std::int64_t>) {
    if (step.op == Op::reduce_scatter_v) {
      std::vector<std::int64_t> counts;
      std::int64_t total = 0;
      for (const std::int32_t member : group.world_ranks) {
        counts.push_back(gather_v_count(step, member));
        total += counts.back();
      }
      const auto mine = values_of<T>(step, w, total);
      record<T>(out, comm.reduce_scatter_v(group, std::span<const T>(mine), counts));
      return;
    }
    auto values = values_of<T>(step, w, step.count);
    comm.all_reduce(group, std::span<T>(values),
                    step.op == Op::all_reduce_mean ? ReduceOp::mean : ReduceOp::sum);
    record<T>(out, values);
  }
}

std::vector<std::byte> run_program(Communicator& comm, const ProgramSpec& spec) {
  const std::int32_t w = comm.world_rank();
  std::vector<std::byte> out;
  Group current = comm.world();
  for (const Step& step : spec.steps) {
    switch (step.op) {
      case Op::use_world:
        current = comm.world();
        continue;
      case Op::use_mesh:
        current = MeshLayout(spec.world, step.dp).dp_group(w);
        continue;
      case Op::split:
        current = comm.split(color_of(step, w), key_of(step, w));
        record_group(out, current);
        continue;
      default:
        break;
    }
    if (current.world_ranks.empty()) continue;  // this rank's split gave it no group
    switch (step.op) {
      case Op::all_gather_object: {
        for (const auto& object : comm.all_gather_object(current, object_of(step, w))) {
          record_value(out, object.size());
          record<std::byte>(out, object);
        }
        break;
      }
      case Op::broadcast: {
        auto values = values_of<double>(step, w, step.count);
        comm.broadcast(current, std::span<double>(values), root_of(step, current));
        record<double>(out, values);
        break;
      }
      case Op::barrier:
        comm.barrier(current);
        break;
      case Op::all_gather:
        if (step.single) {
          run_numeric<float>(comm, step, current, out);
        } else {
          run_numeric<std::int64_t>(comm, step, current, out);
        }
        break;
      default:
        if (step.single) {
          run_numeric<float>(comm, step, current, out);
        } else {
          run_numeric<double>(comm, step, current, out);
        }
        break;
    }
  }
  return out;
}

// ---- The sequential model: every collective computed in one place ----

template <class T>
std::vector<T> model_collective(const Step& step, const Group& group) {
  std::vector<T> result;
  if (step.op == Op::all_gather || step.op == Op::all_gather_v) {
    for (const std::int32_t m : group.world_ranks) {
      const auto count = step.op == Op::all_gather ? step.count : gather_v_count(step, m);
      const auto values = values_of<T>(step, m, count);
      result.insert(result.end(), values.begin(), values.end());
    }
    return result;
  }
  result = values_of<T>(step, group.world_ranks[0], step.count);
  for (std::size_t i = 1; i < group.world_ranks.size(); ++i) {
    const auto next = values_of<T>(step, group.world_ranks[i], step.count);
    for (std::size_t j = 0; j < result.size(); ++j) result[j] = result[j] + next[j];
  }
  if (step.op == Op::all_reduce_mean) {
    for (T& v : result) v = v / static_cast<T>(group.size());
  }
  return result;
}

// Member `w`'s shard (its group rank's counts), summed over the members.
template <class T>
std::vector<T> model_reduce_scatter(const Step& step, const Group& group, std::int32_t w) {
  std::int64_t offset = 0, total = 0;
  for (std::int32_t i = 0; i < group.size(); ++i) {
    const std::int64_t count = gather_v_count(step, group.world_ranks[i]);
    if (i < group.rank_of(w)) offset += count;
    total += count;
  }
  const auto mine = static_cast<std::size_t>(gather_v_count(step, w));
  std::vector<T> sum(mine);
  for (std::size_t i = 0; i < group.world_ranks.size(); ++i) {
    const auto values = values_of<T>(step, group.world_ranks[i], total);
    for (std::size_t j = 0; j < mine; ++j) {
      const T v = values[static_cast<std::size_t>(offset) + j];
      sum[j] = i == 0 ? v : sum[j] + v;
    }
  }
  return sum;
}

std::vector<std::vector<std::byte>> model_program(const ProgramSpec& spec) {
  const auto world = static_cast<std::size_t>(spec.world);
  std::vector<std::vector<std::byte>> out(world);
  std::vector<Group> current(world, world_group_of(spec.world));
  std::int32_t next_split_id = 1;
  for (const Step& step : spec.steps) {
    if (step.op == Op::use_world || step.op == Op::use_mesh) {
      for (std::int32_t w = 0; w < spec.world; ++w) {
        current[w] = step.op == Op::use_world ? world_group_of(spec.world)
                                              : MeshLayout(spec.world, step.dp).dp_group(w);
      }
      continue;
    }
    if (step.op == Op::split) {
      std::map<std::int32_t, std::vector<std::pair<std::int32_t, std::int32_t>>> by_color;
      for (std::int32_t w = 0; w < spec.world; ++w) {
        if (color_of(step, w) >= 0) by_color[color_of(step, w)].emplace_back(key_of(step, w), w);
      }
      for (std::int32_t w = 0; w < spec.world; ++w) current[w] = Group{-1, {}};
      for (auto& [color, members] : by_color) {
        std::ranges::sort(members);
        Group group{next_split_id++, {}};
        for (const auto& member : members) group.world_ranks.push_back(member.second);
        for (const std::int32_t w : group.world_ranks) current[w] = group;
      }
      for (std::int32_t w = 0; w < spec.world; ++w) record_group(out[w], current[w]);
      continue;
    }
    for (std::int32_t w = 0; w < spec.world; ++w) {
      const Group& group = current[w];
      if (group.world_ranks.empty()) continue;
      switch (step.op) {
        case Op::all_gather_object:
          for (const std::int32_t m : group.world_ranks) {
            const auto object = object_of(step, m);
            record_value(out[w], object.size());
            record<std::byte>(out[w], object);
          }
          break;
        case Op::broadcast: {
          const auto values =
              values_of<double>(step, group.world_ranks[root_of(step, group)], step.count);
          record<double>(out[w], values);
          break;
        }
        case Op::barrier:
          break;
        case Op::reduce_scatter_v:
          if (step.single) {
            record<float>(out[w], model_reduce_scatter<float>(step, group, w));
          } else {
            record<double>(out[w], model_reduce_scatter<double>(step, group, w));
          }
          break;
        case Op::all_gather:
          if (step.single) {
            record<float>(out[w], model_collective<float>(step, group));
          } else {
            record<std::int64_t>(out[w], model_collective<std::int64_t>(step, group));
          }
          break;
        default:
          if (step.single) {
            record<float>(out[w], model_collective<float>(step, group));
          } else {
            record<double>(out[w], model_collective<double>(step, group));
          }
          break;
      }
    }
  }
  return out;
}

RC_GTEST_PROP(RandomPrograms, MatchTheModelUnderFifoAndRandomSchedules, ()) {
  const ProgramSpec spec = *gen_program();
  const auto expected = model_program(spec);
  std::vector<Schedule> schedules = default_schedules();
  schedules.push_back({ScheduleKind::random, *rc::gen::arbitrary<std::uint64_t>()});
  for (const Schedule& schedule : schedules) {
    SimulationOptions options;
    options.world_size = spec.world;
    options.schedule = schedule;
    const RunRecord record =
        run_recorded(options, [&spec](Communicator& comm) { return run_program(comm, spec); });
    RC_ASSERT(!record.error.has_value());
    RC_ASSERT(record.outputs == expected);
  }
}

RC_GTEST_PROP(RandomPrograms, WithASeededReductionOrderAreDeterministic, ()) {
  const ProgramSpec spec = *gen_program();
  SimulationOptions options;
  options.world_size = spec.world;
  options.reduction_order_seed = *rc::gen::arbitrary<std::uint64_t>();
  std::vector<Schedule> schedules = default_schedules();
  schedules.push_back({ScheduleKind::random, *rc::gen::arbitrary<std::uint64_t>()});
  const DeterminismReport report = check_determinism(
      options, [&spec](Communicator& comm) { return run_program(comm, spec); }, schedules);
  RC_ASSERT(report.deterministic);
}

}  // namespace
}  // namespace infonce::sim
