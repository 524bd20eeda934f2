#!/bin/sh
# Throughput of the external step, side by side in one run on the same cases (issue 12,
# point 6): the torch worker on the in-process runtime, the same worker under real DDP
# (gloo, one process per rank), and infonce-sim's own C++ step.
#
#   bench/sut_throughput.sh [BUILD_DIR] [CASES] [SEED] [JOBS] [LONG]   (defaults: build 400 1 2 20000)
#
# LONG: the in-process runtime's long campaign, its steady-state rate. Each worker's start-up
# (importing torch, ~1.5 s) is a fixed cost: a fifth of a 4,000-case run, 4% of 20,000.
#
# Cases: `infonce-sim export --limits typical` (the typical distribution, seed SEED). When
# the build has `check --sut`, each torch mode is timed as `infonce-sim check --sut CMD` on
# the campaign of the same seed (generation, reference, oracle, properties included);
# otherwise bench/sut_client.py drives the worker over the protocol on the exported cases
# (steps only, after one warm-up case per world size: real DDP spawns its rank pools then),
# and the output says so (INFONCE_BENCH_DRIVER=client forces it: steady-state steps, no
# process start-up). The C++ row is `infonce-sim check` of the same seed and size.
# INFONCE_BENCH_BASELINE=DIR (another checkout's python/, e.g. from `git archive OLD python`)
# adds its in-process rows to the same run, and the speed-up of this checkout over it.
# Wall-clock ratios: run it on an otherwise idle machine; the same run gives every row.
set -eu
build=${1:-build}
cases=${2:-400}
seed=${3:-1}
jobs=${4:-2}
long_cases=${5:-20000}
root=$(cd "$(dirname "$0")/.." && pwd)
sim=${INFONCE_SIM:-$build/infonce-sim}  # INFONCE_SIM: another build (e.g. with check --sut)
python=${INFONCE_TORCH_PYTHON:-$root/.venv/bin/python}
[ -x "$sim" ] || { echo "sut_throughput: no $sim (build first)" >&2; exit 2; }
"$python" -c "import torch" 2>/dev/null ||
  { echo "sut_throughput: torch not importable by $python" >&2; exit 77; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$sim" export --seed "$seed" --cases "$cases" --limits typical --compensate true \
  --padding fixed "$work/cases" >/dev/null
worker="PYTHONPATH=$root/python $python -m infonce_sim.worker --adapter conformance"
baseline=${INFONCE_BENCH_BASELINE:-}
[ -z "$baseline" ] || [ -f "$baseline/infonce_sim/worker.py" ] ||
  { echo "sut_throughput: INFONCE_BENCH_BASELINE=$baseline has no infonce_sim/worker.py" >&2; exit 2; }
old_worker="PYTHONPATH=$baseline $python -m infonce_sim.worker --adapter conformance"

rate() { awk -v n="$1" -v s="$2" 'BEGIN { printf "%.1f", n / s }'; }
timed() {  # $1 = command; prints "seconds cpu_seconds" (the command and its children)
  "$python" "$root/bench/sut_client.py" --time-command "$1" |
    "$python" -c 'import json,sys; r=json.load(sys.stdin); print(r["seconds"], r["cpu_seconds"])'
}

if [ "${INFONCE_BENCH_DRIVER:-}" != client ] && "$sim" check --help 2>&1 | grep -q -- '--sut'; then
  driver="infonce-sim check --sut (generation, reference, oracle, properties included)"
  run_sut() {  # $1 = worker command [$2 = cases]; prints "cases seconds cpu_seconds"
    n=${2:-$cases}
    echo "$n $(timed "$sim check --sut '$1' --seed $seed --cases $n --limits typical \
      --jobs $jobs --no-corpus >$work/out.txt 2>&1")"
    # A failing campaign would time its shrinking: the run is void.
    grep -q '^PASSED' "$work/out.txt" || { tail -5 "$work/out.txt" >&2; touch "$work/failed"; }
  }
else
  driver="bench/sut_client.py over infonce-sut/1 (steps only, after a warm-up case per world size)"
  run_sut() {
    "$python" "$root/bench/sut_client.py" --jobs "$jobs" --warm-up --sut "$1" "$work/cases" |
      "$python" -c 'import json,sys; r=json.load(sys.stdin); print(r["cases"], r["seconds"], r["cpu_seconds"])'
  }
fi

set -- $(run_sut "$worker --runtime inprocess")
inproc_n=$1 inproc_s=$2 inproc_cpu=$3
if [ -n "$baseline" ]; then
  set -- $(run_sut "$old_worker --runtime inprocess")
  old_n=$1 old_s=$2 old_cpu=$3
fi
if [ "$driver" != "${driver#infonce-sim}" ]; then
  set -- $(run_sut "$worker --runtime inprocess" "$long_cases")
  long_n=$1 long_s=$2 long_cpu=$3
  if [ -n "$baseline" ]; then
    set -- $(run_sut "$old_worker --runtime inprocess" "$long_cases")
    old_long_n=$1 old_long_s=$2 old_long_cpu=$3
  fi
fi
set -- $(run_sut "$worker --runtime ddp --max-pools 8")
ddp_n=$1 ddp_s=$2 ddp_cpu=$3
set -- $(timed "$sim check --seed $seed --cases $cases --limits typical --jobs $jobs --no-corpus >/dev/null 2>&1")
cpp_s=$1 cpp_cpu=$2

[ ! -e "$work/failed" ] || { echo "sut_throughput: a campaign did not pass (above)" >&2; exit 1; }
ddp_per_cpu=$(rate "$ddp_n" "$ddp_cpu")
row() {  # name cases seconds cpu
  per_cpu=$(rate "$2" "$4")
  printf '| %s | %s | %.2f | %s | %.2f | %s | %sx |\n' "$1" "$2" "$3" "$(rate "$2" "$3")" "$4" \
    "$per_cpu" "$(awk -v a="$per_cpu" -v b="$ddp_per_cpu" 'BEGIN { printf "%.1f", a / b }')"
}
echo "# external step throughput: typical distribution, seed $seed, --jobs $jobs"
echo "# driver: $driver"
echo "# cases/CPU-s: cases per CPU second of every process of the mode (DDP: all rank processes)"
echo "| step | cases | wall s | cases/s | CPU s | cases/CPU-s | vs real DDP (CPU) |"
echo "|---|---|---|---|---|---|---|"
row "torch, in-process runtime" "$inproc_n" "$inproc_s" "$inproc_cpu"
[ -z "${old_n:-}" ] || row "torch, in-process runtime, baseline" "$old_n" "$old_s" "$old_cpu"
[ -z "${long_n:-}" ] || row "torch, in-process runtime, $long_n cases" "$long_n" "$long_s" "$long_cpu"
[ -z "${old_long_n:-}" ] ||
  row "torch, in-process runtime, baseline, $old_long_n cases" "$old_long_n" "$old_long_s" "$old_long_cpu"
row "torch, real DDP (gloo)" "$ddp_n" "$ddp_s" "$ddp_cpu"
row "infonce-sim C++ step (check)" "$cases" "$cpp_s" "$cpp_cpu"
if [ -n "$baseline" ]; then
  speedup() {  # label, new cases seconds cpu, old cases seconds cpu
    awk -v l="$1" -v n="$2" -v s="$3" -v c="$4" -v on="$5" -v os="$6" -v oc="$7" 'BEGIN {
      printf "# %s: %.2fx the baseline in cases/s, %.2fx in cases/CPU-s\n", l, (n / s) / (on / os), (n / c) / (on / oc) }'
  }
  echo "# baseline: $baseline"
  speedup "in-process, $inproc_n cases" "$inproc_n" "$inproc_s" "$inproc_cpu" "$old_n" "$old_s" "$old_cpu"
  [ -z "${old_long_n:-}" ] || speedup "in-process, $long_n cases" "$long_n" "$long_s" "$long_cpu" \
    "$old_long_n" "$old_long_s" "$old_long_cpu"
fi
echo "# load average at the end: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
