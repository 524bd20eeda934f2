#!/bin/sh
# End-to-end `check --sut` throughput of two python/ trees, in alternating pairs of runs
# (issue 28's speed guard, measured as a ratio on a shared machine):
#
#   INFONCE_BENCH_BASELINE=DIR bench/sut_ab.sh [BUILD_DIR] [CASES] [PAIRS] [SEED] [JOBS]
#                                                    (defaults: build 4000 5 1 2)
#
# DIR: another checkout's python/ (e.g. `git archive OLD python | tar -x -C /tmp/old` gives
# /tmp/old/python). Each pair runs `infonce-sim check --sut` with the conformance worker on
# the in-process runtime, this checkout's python/ and DIR's, on the same campaign (typical
# distribution, seed SEED, CASES cases, --jobs JOBS), the order alternating from pair to pair
# so that a machine whose load drifts slows both alike. Prints every run (wall s, CPU s of
# every process, cases/s, the 1-minute load average after it), every pair's ratios, and their
# medians. Each campaign must pass, and the two trees' JSON reports must be the same apart
# from the SUT command line (the verdicts and worst errors): a run whose bits moved is void.
set -eu
build=${1:-build}
cases=${2:-4000}
pairs=${3:-5}
seed=${4:-1}
jobs=${5:-2}
root=$(cd "$(dirname "$0")/.." && pwd)
sim=${INFONCE_SIM:-$build/infonce-sim}
python=${INFONCE_TORCH_PYTHON:-$root/.venv/bin/python}
baseline=${INFONCE_BENCH_BASELINE:-}
[ -x "$sim" ] || { echo "sut_ab: no $sim (build first)" >&2; exit 2; }
[ -n "$baseline" ] && [ -f "$baseline/infonce_sim/worker.py" ] ||
  { echo "sut_ab: INFONCE_BENCH_BASELINE must name a python/ directory with infonce_sim/" >&2; exit 2; }
"$python" -c "import torch" 2>/dev/null ||
  { echo "sut_ab: torch not importable by $python" >&2; exit 77; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

run() {  # $1 = label, $2 = python/ directory; prints "cases/s cases/CPU-s"
  worker="PYTHONPATH=$2 $python -m infonce_sim.worker --adapter conformance --runtime inprocess"
  set -- "$1" "$("$python" "$root/bench/sut_client.py" --time-command "$sim check --sut '$worker' \
    --seed $seed --cases $cases --limits typical --jobs $jobs --no-corpus --format json \
    >$work/$1.json 2>$work/$1.err" |
    "$python" -c 'import json,sys; r=json.load(sys.stdin); print(r["seconds"], r["cpu_seconds"])')"
  grep -q '"result": "passed"' "$work/$1.json" ||
    { echo "sut_ab: the $1 campaign did not pass" >&2; tail -5 "$work/$1.err" >&2; exit 1; }
  load=$(cut -d' ' -f1 /proc/loadavg)
  set -- "$1" $2
  awk -v l="$1" -v n="$cases" -v s="$2" -v c="$3" -v load="$load" 'BEGIN {
    printf "# %-8s %7.2f s wall %7.2f CPU s %7.1f cases/s %6.1f cases/CPU-s (load %s)\n",
      l, s, c, n / s, n / c, load > "/dev/stderr"; printf "%f %f\n", n / s, n / c }'
}

echo "# check --sut, typical, seed $seed, $cases cases, --jobs $jobs; baseline $baseline"
: >"$work/ratios"
i=1
while [ "$i" -le "$pairs" ]; do
  if [ $((i % 2)) -eq 1 ]; then
    new=$(run new "$root/python"); old=$(run baseline "$baseline")
  else
    old=$(run baseline "$baseline"); new=$(run new "$root/python")
  fi
  grep -v '"command":' "$work/new.json" >"$work/new.cmp"
  grep -v '"command":' "$work/baseline.json" >"$work/baseline.cmp"
  cmp -s "$work/new.cmp" "$work/baseline.cmp" ||
    { echo "sut_ab: the two trees' reports differ (pair $i)" >&2; exit 1; }
  echo "$new $old" | awk -v i="$i" '{ r = $1 / $3; c = $2 / $4
    printf "pair %d: %.3fx cases/s, %.3fx cases/CPU-s\n", i, r, c > "/dev/stderr"; print r, c }' \
    >>"$work/ratios"
  i=$((i + 1))
done 2>&1
sort -n -k1 "$work/ratios" | awk '{ a[NR] = $1 } END {
  printf "median over %d pairs: %.3fx cases/s", NR, (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
sort -n -k2 "$work/ratios" | awk '{ a[NR] = $2 } END {
  printf ", %.3fx cases/CPU-s (reports identical in every pair)\n", (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
