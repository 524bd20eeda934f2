// How the cost of a simulated data-parallel step grows with the number of
// ranks P and with the global batch, and what a rank costs in memory.
//
// Fixed, deterministic cases: W = P, use_batch, mean reduction, F = D = 8,
// every group [q, p, n] (1 negative, 3 rows), data_seed 2026, float64, object
// gather. Times are thread CPU time (CLOCK_THREAD_CPUTIME_ID: every rank is a
// fiber of this thread), median of 5 repetitions of >= 20 ms each, or one cold
// call when a call takes >= 1 s.
//
//   1. use_batch = false (each rank's loss is local), P = 16, 64, 256, 1024,
//      4096, each in a fresh forked child: the first step's peak-RSS growth per
//      rank, minus the data a rank holds, against the 64 KiB target.
//   2. P = 1, 2, 4, ..., 4096 at 1 group per rank (N = 3P global rows): the
//      step, per rank, and the full-batch reference. Every rank computes the
//      full global loss, as the trainer does, so the step is O(P N^2 D); the
//      sweep stops where the next step is predicted to exceed --cap-seconds.
//   3. P = 8, groups per rank 1, 2, ..., 64 (N = 24 .. 1536).
//
// Usage: scaling_bench [--out DIR] [--cap-seconds S] [--max-p P]
//   --out DIR writes DIR/scaling.md (the tables) and DIR/scaling.svg (the plot).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include "bench/bench_util.hpp"
#include "properties/case_spec.hpp"
#include "properties/svg_canvas.hpp"
#include "step/run_case.hpp"

namespace {

using namespace infonce;

constexpr std::int32_t kDim = 8;  // F = D
constexpr std::int32_t kNegatives = 1;
constexpr std::int32_t kRowsPerGroup = kNegatives + 2;
constexpr std::uint64_t kDataSeed = 2026;
constexpr std::int32_t kMaxP = 4096;
constexpr double kTargetKiBPerRank = 64;

struct Args {
  std::optional<std::filesystem::path> out;
  double cap_seconds = 10;
  std::int32_t max_p = kMaxP;
};

[[noreturn]] void usage_error(const std::string& message) {
  std::fprintf(stderr, "scaling_bench: error: %s\n", message.c_str());
  std::exit(2);
}

double parse_number(const std::string& option, const std::string& text) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(value)) {
    usage_error(option + " expects a number, not '" + text + "'");
  }
  return value;
}

Args parse_args(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string option = argv[i];
    if (option == "--help" || option == "-h") {
      std::printf("usage: scaling_bench [--out DIR] [--cap-seconds S] [--max-p P]\n");
      std::exit(0);
    }
    if (option != "--out" && option != "--cap-seconds" && option != "--max-p") {
      usage_error("unknown option '" + option + "' (see --help)");
    }
    if (i + 1 >= argc) usage_error(option + " needs a value");
    const std::string value = argv[++i];
    if (option == "--out") {
      if (value.empty()) usage_error("--out needs a directory");
      args.out = value;
    } else if (option == "--cap-seconds") {
      args.cap_seconds = parse_number(option, value);
      if (args.cap_seconds <= 0) usage_error("--cap-seconds must be > 0, not '" + value + "'");
    } else {
      const double p = parse_number(option, value);
      const auto whole = static_cast<std::int32_t>(p);
      if (p < 1 || p > kMaxP || whole != p || (whole & (whole - 1)) != 0) {
        usage_error("--max-p must be a power of 2 in 1..4096, not '" + value + "'");
      }
      args.max_p = whole;
    }
  }
  return args;
}

Case scaling_case(std::int32_t ranks, std::int32_t groups_per_rank, bool use_batch) {
  properties::CaseSpec spec;
  spec.world = ranks;
  spec.dp = ranks;
  spec.negatives.assign(1, std::vector<std::vector<std::int32_t>>(
                               ranks, std::vector<std::int32_t>(groups_per_rank, kNegatives)));
  spec.feature_dim = kDim;
  spec.embedding_dim = kDim;
  spec.use_batch = use_batch;
  spec.reduction = Reduction::mean;
  spec.data_seed = kDataSeed;
  return properties::build_case(spec);
}

// RunOptions with shared loss evaluation, where step/ offers it (a field the
// step layer may add; without it the shared column is left out).
template <class Options>
constexpr bool kCanShareLosses = requires(Options o) {
  o.share_identical_losses = true;
};

template <class Options>
Options sharing_options() {
  Options options{};
  if constexpr (kCanShareLosses<Options>) options.share_identical_losses = true;
  return options;
}

constexpr bool kShared = kCanShareLosses<step::RunOptions>;

// Something to keep the optimiser from dropping a call; printed at the end.
double g_checksum = 0;

bench::Measurement time_step(const Case& c, const step::RunOptions& options) {
  return bench::measure([&] { g_checksum += step::run_on_fibers(c, {}, options).losses[0]; });
}

bench::Measurement time_reference(const Case& c) {
  return bench::measure([&] { g_checksum += step::compute_case_reference(c).loss; });
}

// ----------------------------------------------------------------------------
// 1. Memory per rank, use_batch = false, each P in a fresh child process.

// Plain data: it crosses a pipe from the child that measured it.
struct MemoryPoint {
  std::int32_t ranks = 0;
  bool peak_reset = false;              // VmHWM could be reset before the step
  std::int64_t growth_bytes = 0;        // peak RSS of the first step - RSS before it
  std::int64_t warm_growth_bytes = -1;  // the same for a second step; -1: not measured
  std::int64_t rss_after_bytes = 0;     // VmRSS after the first step
  std::int64_t data_bytes_per_rank = 0;
};

struct MemoryFigures {
  std::vector<MemoryPoint> points;  // ascending P; the last is the largest
  bench::Measurement step;          // at the largest P
  bench::Measurement reference;
};

// What a rank holds as data during the step, in doubles: its shard's features
// (rows x F), its copy of the weight (D x F), its embeddings and their
// gradient (rows x D each), and its weight gradient (D x F). The case itself
// (every shard's features and the weight) exists before the baseline.
std::int64_t rank_data_bytes(const Case& c) {
  const std::int64_t rows = c.batches[0][0].features.rows();
  const std::int64_t f = c.feature_dim(), d = c.embedding_dim();
  return static_cast<std::int64_t>(sizeof(double)) * (rows * f + d * f + 2 * rows * d + d * f);
}

MemoryPoint measure_memory_here(std::int32_t ranks) {
  MemoryPoint m;
  m.ranks = ranks;
  const Case c = scaling_case(ranks, 1, /*use_batch=*/false);
  m.data_bytes_per_rank = rank_data_bytes(c);
  m.peak_reset = bench::reset_peak_rss();
  const std::int64_t before = bench::proc_status_bytes("VmRSS");
  g_checksum += step::run_on_fibers(c, {}, {}).losses[0];
  m.growth_bytes = bench::proc_status_bytes("VmHWM") - before;
  m.rss_after_bytes = bench::proc_status_bytes("VmRSS");
  if (m.peak_reset && bench::reset_peak_rss()) {  // again, with the stacks cached and resident
    const std::int64_t warm_before = bench::proc_status_bytes("VmRSS");
    g_checksum += step::run_on_fibers(c, {}, {}).losses[0];
    m.warm_growth_bytes = bench::proc_status_bytes("VmHWM") - warm_before;
  }
  return m;
}

// In a forked child, so that every point starts with an empty stack pool and
// malloc arena, as a fresh process would (this process has no other threads).
MemoryPoint measure_memory_in_child(std::int32_t ranks) {
  int fds[2];
  if (pipe(fds) != 0) usage_error("pipe failed");
  const pid_t child = fork();
  if (child < 0) usage_error("fork failed");
  if (child == 0) {
    close(fds[0]);
    int code = 0;
    try {
      const MemoryPoint m = measure_memory_here(ranks);
      code = write(fds[1], &m, sizeof m) == static_cast<ssize_t>(sizeof m) ? 0 : 1;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "scaling_bench: error: memory at P = %d: %s\n", ranks, e.what());
      code = 1;
    }
    _exit(code);
  }
  close(fds[1]);
  MemoryPoint m;
  const ssize_t got = read(fds[0], &m, sizeof m);
  close(fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  if (got != static_cast<ssize_t>(sizeof m) || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "scaling_bench: error: the memory measurement at P = %d failed\n", ranks);
    std::exit(1);
  }
  return m;
}

// P = 16, 64, 256, ... up to the largest P, which is always measured.
MemoryFigures measure_memory(std::int32_t max_ranks) {
  MemoryFigures figures;
  std::vector<std::int32_t> ranks;
  for (std::int32_t p = 16; p < max_ranks; p *= 4) ranks.push_back(p);
  ranks.push_back(max_ranks);
  for (std::int32_t p : ranks) figures.points.push_back(measure_memory_in_child(p));
  const Case c = scaling_case(max_ranks, 1, /*use_batch=*/false);
  figures.step = time_step(c, {});
  figures.reference = time_reference(c);
  return figures;
}

// ----------------------------------------------------------------------------
// 2 and 3. Time sweeps.

struct Row {
  std::int32_t ranks = 0;
  std::int32_t groups_per_rank = 0;
  std::int64_t rows = 0;  // global rows N
  std::optional<bench::Measurement> step;
  std::optional<bench::Measurement> shared_step;
  std::optional<bench::Measurement> reference;
  std::string skipped;  // why a series was not run
};

// Stops a series once its next point is predicted to take longer than the
// cap: the prediction is the last time times the last growth factor.
class SeriesCap {
 public:
  explicit SeriesCap(double cap_seconds) : cap_(cap_seconds) {}
  std::optional<double> predicted_over_cap() const {
    if (last_ <= 0) return std::nullopt;
    const double factor = previous_ > 0 ? last_ / previous_ : 1.0;
    const double predicted = last_ * std::max(factor, 1.0);
    if (predicted > cap_) return predicted;
    return std::nullopt;
  }
  void record(double seconds) {
    previous_ = last_;
    last_ = seconds;
  }

 private:
  double cap_;
  double previous_ = 0;
  double last_ = 0;
};

std::string seconds_text(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g s", s);
  return text;
}

// Runs one point of a series unless the cap predicts it too long.
template <class F>
std::optional<bench::Measurement> capped(SeriesCap& cap, const char* series, double cap_seconds,
                                         std::string& skipped, F&& run) {
  if (const auto predicted = cap.predicted_over_cap()) {
    skipped += std::string(skipped.empty() ? "" : "; ") + series + " not run (predicted " +
               seconds_text(*predicted) + " > cap " + seconds_text(cap_seconds) + ")";
    cap.record(*predicted);
    return std::nullopt;
  }
  const bench::Measurement m = run();
  cap.record(m.seconds);
  return m;
}

std::vector<Row> sweep(const std::vector<std::pair<std::int32_t, std::int32_t>>& points,
                       double cap_seconds) {
  SeriesCap step_cap(cap_seconds), shared_cap(cap_seconds), reference_cap(cap_seconds);
  std::vector<Row> rows;
  for (const auto& [ranks, groups] : points) {
    Row row;
    row.ranks = ranks;
    row.groups_per_rank = groups;
    row.rows = static_cast<std::int64_t>(ranks) * groups * kRowsPerGroup;
    const Case c = scaling_case(ranks, groups, /*use_batch=*/true);
    row.step = capped(step_cap, "step", cap_seconds, row.skipped, [&] { return time_step(c, {}); });
    if constexpr (kShared) {
      row.shared_step = capped(shared_cap, "shared step", cap_seconds, row.skipped,
                               [&] { return time_step(c, sharing_options<step::RunOptions>()); });
    }
    row.reference = capped(reference_cap, "reference", cap_seconds, row.skipped,
                           [&] { return time_reference(c); });
    rows.push_back(std::move(row));
    std::fprintf(stderr, "  P=%d groups/rank=%d N=%lld done\n", ranks, groups,
                 static_cast<long long>(rows.back().rows));
  }
  return rows;
}

// ----------------------------------------------------------------------------
// Tables.

std::string fixed(double value, int decimals) {
  char text[48];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

std::string significant(double value) {
  char text[48];
  std::snprintf(text, sizeof text, "%.3g", value);
  return text;
}

std::string ms_cell(const std::optional<bench::Measurement>& m) {
  if (!m) return "-";
  return fixed(1e3 * m->seconds, 3) + (m->repetitions == 1 ? " (1 run)" : "");
}

// Nanoseconds per unit of work, or "-".
std::string per_work_cell(const std::optional<bench::Measurement>& m, double work) {
  return m ? significant(1e9 * m->seconds / work) : "-";
}

std::string sweep_table(const std::vector<Row>& rows) {
  std::ostringstream t;
  t << "| P | groups/rank | global rows N | step ms | per rank us | step ns/(N^2 D) | per rank "
       "ns/(N^2 D) |";
  if (kShared) t << " shared-loss step ms | shared ns/(N^2 D) |";
  t << " reference ms | reference ns/(N^2 D) |\n|";
  const int columns = kShared ? 11 : 9;
  for (int i = 0; i < columns; ++i) t << "--:|";
  t << "\n";
  std::string notes;
  for (const Row& r : rows) {
    const double n2d = static_cast<double>(r.rows) * static_cast<double>(r.rows) * kDim;
    t << "| " << r.ranks << " | " << r.groups_per_rank << " | " << r.rows << " | "
      << ms_cell(r.step) << " | "
      << (r.step ? fixed(1e6 * r.step->seconds / r.ranks, 2) : std::string("-")) << " | "
      << per_work_cell(r.step, n2d) << " | " << per_work_cell(r.step, n2d * r.ranks) << " |";
    if (kShared) {
      t << " " << ms_cell(r.shared_step) << " | " << per_work_cell(r.shared_step, n2d) << " |";
    }
    t << " " << ms_cell(r.reference) << " | " << per_work_cell(r.reference, n2d) << " |\n";
    if (!r.skipped.empty()) {
      notes += "- P = " + std::to_string(r.ranks) + ", N = " + std::to_string(r.rows) + ": " +
               r.skipped + "\n";
    }
  }
  if (!notes.empty()) t << "\n" << notes;
  return t.str();
}

std::string kib_text(double bytes) {
  return fixed(bytes / 1024.0, 2);
}

std::string memory_table(const MemoryFigures& figures) {
  std::ostringstream t;
  t << "| P | peak RSS growth, all ranks MiB | growth per rank KiB | data per rank KiB | **beyond "
       "the data, per rank KiB** | target < "
    << fixed(kTargetKiBPerRank, 0)
    << " KiB | marginal growth per added rank KiB | second (warm) step: growth per rank KiB "
       "|\n|--:|--:|--:|--:|--:|:-:|--:|--:|\n";
  bool all_reset = true;
  const MemoryPoint* previous = nullptr;
  for (const MemoryPoint& m : figures.points) {
    const std::string marginal =
        previous == nullptr
            ? std::string("-")
            : kib_text(static_cast<double>(m.growth_bytes - previous->growth_bytes) /
                       (m.ranks - previous->ranks));
    previous = &m;
    const double per_rank = static_cast<double>(m.growth_bytes) / m.ranks;
    const double beyond = per_rank - static_cast<double>(m.data_bytes_per_rank);
    t << "| " << m.ranks << " | " << fixed(static_cast<double>(m.growth_bytes) / 1048576.0, 2)
      << " | " << kib_text(per_rank) << " | "
      << kib_text(static_cast<double>(m.data_bytes_per_rank)) << " | **" << kib_text(beyond)
      << "** | " << (beyond / 1024.0 < kTargetKiBPerRank ? "met" : "NOT met") << " | " << marginal
      << " | "
      << (m.warm_growth_bytes >= 0 ? kib_text(static_cast<double>(m.warm_growth_bytes) / m.ranks)
                                   : std::string("-"))
      << " |\n";
    all_reset = all_reset && m.peak_reset;
  }
  const MemoryPoint& largest = figures.points.back();
  t << "\nAt P = " << largest.ranks << " (use_batch = false) one step takes "
    << ms_cell(figures.step) << " ms (" << fixed(1e6 * figures.step.seconds / largest.ranks, 2)
    << " us per rank), the reference " << ms_cell(figures.reference)
    << " ms; RSS after the first step: "
    << fixed(static_cast<double>(largest.rss_after_bytes) / 1048576.0, 2)
    << " MiB (the stack pool keeps the stacks for the next step).\n";
  if (!all_reset) {
    t << "\n(/proc/self/clear_refs was not writable: a growth is VmHWM after minus VmRSS before, "
         "an upper bound if the process peaked earlier.)\n";
  }
  return t.str();
}

std::string report_markdown(const MemoryFigures& memory, const std::vector<Row>& by_ranks,
                            const std::vector<Row>& by_batch, const Args& args) {
  std::ostringstream md;
  md << "# Scaling of the simulated step\n\n"
     << "Generated by `bench/scaling.sh` (`scaling_bench`), do not edit.\n\n"
     << "Machine: " << bench::machine_line() << "; g++ " << __VERSION__
     << "; one thread. Times are thread CPU time (CLOCK_THREAD_CPUTIME_ID; every rank is a fiber "
        "of that thread): the median of 5 repetitions of >= 20 ms each, or one cold run "
        "(marked) when a run takes >= 1 s.\n\n"
     << "Cases: W = P (no replicas), use_batch, mean reduction, F = D = 8, every group [q, p, n] "
        "(1 negative, 3 rows), float64, object gather, data_seed "
     << kDataSeed
     << ". N is the global batch in rows. With use_batch every rank gathers all N rows and "
        "computes the full global loss (as the trainer does), so one step costs O(P N^2 D): "
        "`per rank ns/(N^2 D)` flat means the per-rank work is quadratic in the global batch. The "
        "reference is the single-process full-batch loss and gradient, O(N^2 D).\n";
  if (kShared) {
    md << "The shared-loss step lets ranks whose loss inputs are bit-identical share one "
          "evaluation (RunOptions::share_identical_losses, what the property campaign uses): "
          "O(N^2 D) once. The members of an object gather share its result, and what is "
          "derived from it alone (the concatenated shards, the parsed group layout, their "
          "hashes) is built once per gather; a rank whose gathered slot holds its own bits takes "
          "that batch, so per rank it is its own rows plus O(P) bookkeeping (group member "
          "lists), not O(N D).\n";
  }
  md << "\n## Memory per rank (use_batch = false, 1 group [q, p, n] per rank)\n\n"
     << memory_table(memory)
     << "\nEach P is measured in a fresh child process (fork). The growth is the first step's "
        "peak RSS (VmHWM, reset with /proc/self/clear_refs just before the step) minus the RSS "
        "before it, divided by P: every fiber stack is mapped and touched fresh. It includes each "
        "rank's fiber stack pages "
        "touched (stacks are committed lazily), the fiber and scheduler records, the simulator's "
        "collective bookkeeping, the per-rank results the step returns, and malloc overhead. The "
        "data subtracted is, per rank, its shard's features (rows x F), its copy of the weight "
        "(D x F), its embeddings and their gradient (rows x D each) and its weight gradient "
        "(D x F), in doubles; the case itself is built before the baseline and is not in the "
        "growth. The marginal column is (growth(P) - growth(previous P)) / (P - previous P): "
        "the cost of one more rank at that size, without the fixed cost of a process's first "
        "step (which dominates the per-rank figure at small P); if it grows with P, some "
        "per-rank state is O(P) (e.g. a rank's copy of its group's member list, 4 B per "
        "member). A second step reuses the cached stacks (already resident) and the memory "
        "malloc kept, so its growth shows what is transient per step.\n"
     << "\n## Time vs P (1 group per rank: N = 3P)\n\n"
     << sweep_table(by_ranks) << "\nSweep up to P = " << args.max_p
     << "; a series stops where its next step is predicted (last time x last growth factor) to "
        "take more than "
     << seconds_text(args.cap_seconds) << ".\n"
     << "\n## Time vs global batch at P = 8\n\n"
     << sweep_table(by_batch) << "\n![scaling](scaling.svg)\n";
  return md.str();
}

// ----------------------------------------------------------------------------
// SVG: two log-log panels, step and reference time vs P and vs N at P = 8.

struct Series {
  std::string name;
  std::string color;
  bool dashed = false;
  std::vector<std::pair<double, double>> points;  // (x, seconds)
};

std::string time_label(double seconds) {
  if (seconds >= 1) return significant(seconds) + " s";
  if (seconds >= 1e-3) return significant(seconds * 1e3) + " ms";
  if (seconds >= 1e-6) return significant(seconds * 1e6) + " us";
  return significant(seconds * 1e9) + " ns";
}

std::string number_label(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.0f", value);
  return text;
}

struct Panel {
  std::string title, x_label;
  std::vector<double> x_ticks;
  std::vector<Series> series;
};

void draw_panel(properties::SvgCanvas& svg, const Panel& panel, double left, double top,
                double y_low, double y_high) {
  const double width = 380, height = 260;
  const double x_low = panel.x_ticks.front(), x_high = panel.x_ticks.back();
  const auto px = [&](double x) {
    return left + width * (std::log(x) - std::log(x_low)) / (std::log(x_high) - std::log(x_low));
  };
  const auto py = [&](double y) {
    return top + height -
           height * (std::log(y) - std::log(y_low)) / (std::log(y_high) - std::log(y_low));
  };
  const std::string middle = "text-anchor=\"middle\"";
  svg.text(left + width / 2, top - 12, panel.title, 11, middle + " font-weight=\"bold\"");
  svg.rect(left, top, width, height, "none", "stroke=\"#333\"");
  for (double x : panel.x_ticks) {
    svg.line(px(x), top, px(x), top + height, "#ddd");
    svg.text(px(x), top + height + 16, number_label(x), 11, middle);
  }
  for (double y = y_low; y <= y_high * 1.0001; y *= 10) {
    svg.line(left, py(y), left + width, py(y), "#ddd");
    svg.text(left - 6, py(y) + 4, time_label(y), 11, "text-anchor=\"end\"");
  }
  svg.text(left + width / 2, top + height + 36, panel.x_label, 11, middle);
  svg.text(0, 0, "thread CPU time per call", 11,
           middle + " transform=\"translate(" + std::to_string(left - 62) + "," +
               std::to_string(top + height / 2) + ") rotate(-90)\"");
  double legend_y = top + 16;
  for (const Series& s : panel.series) {
    if (s.points.empty()) continue;
    const std::string style =
        std::string("stroke-width=\"2\"") + (s.dashed ? " stroke-dasharray=\"6,4\"" : "");
    std::vector<std::pair<double, double>> points;
    for (const auto& [x, y] : s.points) points.emplace_back(px(x), py(y));
    svg.polyline(points, s.color, style);
    for (const auto& [x, y] : points) svg.circle(x, y, 3, s.color);
    svg.line(left + 10, legend_y - 4, left + 34, legend_y - 4, s.color, style);
    svg.text(left + 40, legend_y, s.name, 11);
    legend_y += 16;
  }
}

std::vector<Series> series_of(const std::vector<Row>& rows, bool x_is_ranks) {
  Series step{"step (every rank: full loss)", "#c0392b", false, {}};
  Series shared{"step, shared loss", "#8e44ad", false, {}};
  Series reference{"reference (one process)", "#2471a3", true, {}};
  for (const Row& r : rows) {
    const double x = x_is_ranks ? r.ranks : static_cast<double>(r.rows);
    if (r.step) step.points.emplace_back(x, r.step->seconds);
    if (r.shared_step) shared.points.emplace_back(x, r.shared_step->seconds);
    if (r.reference) reference.points.emplace_back(x, r.reference->seconds);
  }
  std::vector<Series> out{step};
  if (kShared) out.push_back(shared);
  out.push_back(reference);
  return out;
}

// Decades enclosing every point's time.
std::pair<double, double> time_range(const std::vector<Panel>& panels) {
  double low = 1e9, high = 0;
  for (const Panel& p : panels) {
    for (const Series& s : p.series) {
      for (const auto& point : s.points) {
        low = std::min(low, point.second);
        high = std::max(high, point.second);
      }
    }
  }
  if (high <= 0) return {1e-6, 1};
  return {std::pow(10.0, std::floor(std::log10(low))), std::pow(10.0, std::ceil(std::log10(high)))};
}

std::string report_svg(const std::vector<Row>& by_ranks, const std::vector<Row>& by_batch) {
  std::vector<double> rank_ticks;
  for (double p = 1; p <= by_ranks.back().ranks; p *= 4) rank_ticks.push_back(p);
  if (rank_ticks.back() < by_ranks.back().ranks) rank_ticks.push_back(by_ranks.back().ranks);
  std::vector<double> row_ticks;
  for (const Row& r : by_batch) row_ticks.push_back(static_cast<double>(r.rows));
  if (row_ticks.size() > 4) {  // every other one, keeping both ends
    std::vector<double> thinned;
    for (std::size_t i = 0; i < row_ticks.size(); i += 2) thinned.push_back(row_ticks[i]);
    if (thinned.back() != row_ticks.back()) thinned.push_back(row_ticks.back());
    row_ticks = thinned;
  }
  const std::vector<Panel> panels{
      {"Time vs ranks P (3 rows per rank: N = 3P)", "ranks P", rank_ticks,
       series_of(by_ranks, true)},
      {"Time vs global batch N at P = 8", "global rows N", row_ticks, series_of(by_batch, false)}};
  const auto [y_low, y_high] = time_range(panels);
  properties::SvgCanvas svg(1000, "sans-serif");
  draw_panel(svg, panels[0], 90, 40, y_low, y_high);
  draw_panel(svg, panels[1], 590, 40, y_low, y_high);
  svg.text(500, 370,
           "use_batch, F = D = 8, float64; a series stops where its next step is predicted to "
           "exceed the cap (see scaling.md)",
           11, "text-anchor=\"middle\" fill=\"#555\"");
  std::ostringstream out;
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  svg.write(out, 380);
  return out.str();
}

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) usage_error("cannot write " + path.string());
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse_args(argc, argv);
  if (args.out && !std::filesystem::is_directory(*args.out)) {
    usage_error("--out " + args.out->string() + ": not a directory");
  }
  std::fprintf(stderr, "memory up to P = %d (use_batch = false)\n", args.max_p);
  const MemoryFigures memory = measure_memory(args.max_p);
  std::vector<std::pair<std::int32_t, std::int32_t>> rank_points, batch_points;
  for (std::int32_t p = 1; p <= args.max_p; p *= 2) rank_points.emplace_back(p, 1);
  for (std::int32_t g = 1; g <= 64; g *= 2) batch_points.emplace_back(8, g);
  std::fprintf(stderr, "time vs P\n");
  const std::vector<Row> by_ranks = sweep(rank_points, args.cap_seconds);
  std::fprintf(stderr, "time vs global batch at P = 8\n");
  const std::vector<Row> by_batch = sweep(batch_points, args.cap_seconds);

  const std::string markdown = report_markdown(memory, by_ranks, by_batch, args);
  std::fputs(markdown.c_str(), stdout);
  std::fprintf(stderr, "checksum %.17g\n", g_checksum);
  if (args.out) {
    write_file(*args.out / "scaling.md", markdown);
    write_file(*args.out / "scaling.svg", report_svg(by_ranks, by_batch));
  }
  return 0;
}
