#!/usr/bin/env bash
# Cases per second of infonce-sim against the PyTorch DDP conformance driver
# (tests/torch/ddp_conformance.py), side by side in one run, on the same case
# files:
#   1. `infonce-sim export` writes K generated cases (seed 2026, typical
#      limits, meshes 2/2, 4/2, 4/4, 8/4, the fix on) into a temporary DIR;
#   2. the torch driver runs them for real (one gloo process per rank,
#      DistributedDataParallel, plus its float64 reference): wall time of the
#      whole driver run, which uses as many cores as it wants;
#   3. infonce-sim, pinned to one core (taskset -c 0 when available):
#      a. bench/casefile_check_bench: every property of SPEC section 5 on each
#         case (properties::check_case: the reference, the compensated step,
#         the uncompensated step, the other code path, a random schedule),
#         files read once, in memory, thread CPU time;
#      b. `infonce-sim corpus replay DIR` end to end (process start, JSON
#         reading, reference + one distributed step + comparison per case, the
#         work the torch driver does per case), wall time, median of 5 runs.
# Prints the three rates and the ratios, and for scale the torch driver's own
# timer (its DDP steps only: no process start, no rank-pool spawning, no
# reference). Exit 77 when torch is not importable.
#
# Usage: bench/vs_torch.sh BUILD_DIR [K=40]   (INFONCE_TORCH_PYTHON: the python with torch)
set -euo pipefail

die() {
  echo "vs_torch.sh: error: $*" >&2
  exit 2
}

[[ $# -ge 1 && $# -le 2 ]] || die "usage: bench/vs_torch.sh BUILD_DIR [K=40]"
build="$1"
cases="${2:-40}"
[[ "$cases" =~ ^[1-9][0-9]*$ ]] || die "K must be a whole number >= 1, not '$cases'"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
sim="$build/infonce-sim"
check_bench="$build/bench/casefile_check_bench"
python="${INFONCE_TORCH_PYTHON:-/usr/bin/python3}"  # as tests/torch/CMakeLists.txt
driver="$repo/tests/torch/ddp_conformance.py"
[[ -x "$sim" ]] || die "$sim not found (ninja -C $build infonce-sim)"
[[ -x "$check_bench" ]] || die "$check_bench not found (ninja -C $build casefile_check_bench)"
[[ -x "$python" ]] || { echo "SKIPPED: $python not found (torch not importable)"; exit 77; }

pin=()
if command -v taskset >/dev/null && taskset -c 0 true 2>/dev/null; then
  pin=(taskset -c 0)
  pinned="pinned to CPU 0 (taskset -c 0)"
else
  pinned="not pinned (taskset unavailable)"
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
dir="$work/cases"

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.6f", b - a }'; }
rate() { awk -v n="$1" -v s="$2" 'BEGIN { printf "%.2f", n / s }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f", a / b }'; }

# 1. The case files.
"$sim" export --seed 2026 --cases "$cases" --limits typical --mesh 2/2,4/2,4/4,8/4 \
  --compensate true "$dir" >"$work/export.log" || die "infonce-sim export failed: $(cat "$work/export.log")"
files=$(find "$dir" -maxdepth 1 -name '*.json' | wc -l)
echo "cases: $(head -n 1 "$work/export.log")"

# 2. The torch driver, whole run, wall time.
start=$(now)
set +e
"$python" "$driver" "$dir" >"$work/torch.log" 2>&1
torch_code=$?
set -e
torch_seconds=$(elapsed "$start")
if [[ $torch_code == 77 ]]; then
  echo "SKIPPED: the torch driver exited 77 (torch not importable): $(tail -n 1 "$work/torch.log")"
  exit 77
fi
[[ $torch_code == 0 ]] || die "the torch driver exited $torch_code: $(tail -n 3 "$work/torch.log")"
torch_passed=$(sed -n 's/^\([0-9]*\) passed.*/\1/p' "$work/torch.log")
[[ "$torch_passed" == "$files" ]] || die "the torch driver passed $torch_passed of $files cases"
# The driver's own line: "torch DDP: N cases in S s = R cases/s (including T s spawning rank pools)".
driver_line=$(grep '^torch DDP:' "$work/torch.log" || true)
spawn_seconds=$(sed -n 's/.*including \([0-9.]*\) s spawning.*/\1/p' <<<"$driver_line")
driver_seconds=$(sed -n 's/.* cases in \([0-9.]*\) s = .*/\1/p' <<<"$driver_line")

# 3a. Property checks in memory, one core.
"${pin[@]}" "$check_bench" "$dir" >"$work/check.log" || die "casefile_check_bench failed: $(cat "$work/check.log")"
check_rate=$(sed -n 's/^checks\/s //p' "$work/check.log")

# 3b. The CLI end to end, one core: median wall time of 5 runs.
cli_times=()
for _ in 1 2 3 4 5; do
  start=$(now)
  "${pin[@]}" "$sim" corpus replay "$dir" >"$work/replay.log" || die "infonce-sim corpus replay failed: $(tail -n 1 "$work/replay.log")"
  cli_times+=("$(elapsed "$start")")
done
cli_seconds=$(printf '%s\n' "${cli_times[@]}" | sort -g | sed -n 3p)
cli_rate=$(rate "$files" "$cli_seconds")
torch_rate=$(rate "$files" "$torch_seconds")

echo "machine: $(grep -m 1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //') ($(nproc) CPUs available)"
echo "infonce-sim: $pinned; torch: as many cores as it uses (one gloo process per rank)"
echo
printf '%-62s %12s\n' "figure ($files case files)" "cases/s"
printf '%-62s %12s\n' "torch DDP driver, whole run (wall $(printf %.2f "$torch_seconds") s)" "$torch_rate"
if [[ -n "$spawn_seconds" && -n "$driver_seconds" ]]; then
  steady=$(awk -v a="$driver_seconds" -v b="$spawn_seconds" 'BEGIN { printf "%.2f", a - b }')
  printf '%-62s %12s\n' "  DDP steps only (driver's own timer, minus spawning: $steady s)" \
    "$(rate "$files" "$steady")"
fi
printf '%-62s %12s\n' "infonce-sim check_case, in memory, 1 core (every property)" "$check_rate"
printf '%-62s %12s\n' "infonce-sim corpus replay, end to end, 1 core (wall)" "$cli_rate"
echo
echo "ratio in-memory check / torch:    $(ratio "$check_rate" "$torch_rate")x"
echo "ratio end-to-end CLI / torch:     $(ratio "$cli_rate" "$torch_rate")x"
if [[ -n "${steady:-}" ]]; then
  echo "(against torch's DDP steps alone, no spawning, no reference: $(ratio "$check_rate" "$(rate "$files" "$steady")")x" \
    "and $(ratio "$cli_rate" "$(rate "$files" "$steady")")x)"
fi
