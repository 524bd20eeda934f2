#!/usr/bin/env bash
# Cases per second (of CPU time, see seconds_of) of `infonce-sim check` with
# the oracle on every case against the oracle off, side by side in one run on
# one core: runs
# interleaved (every, off, every, off, ...), the median of 5 each, on the
# "typical" and the default generator distributions.
#
# Usage: bench/oracle_rate.sh BUILD_DIR
#   INFONCE_RATE_CASES_TYPICAL (default 20000), INFONCE_RATE_CASES_DEFAULT (default 4000)
set -euo pipefail

die() {
  echo "oracle_rate.sh: error: $*" >&2
  exit 2
}
[[ $# == 1 ]] || die "usage: bench/oracle_rate.sh BUILD_DIR"
sim="$1/infonce-sim"
[[ -x "$sim" ]] || die "$sim not found (ninja -C $1 infonce-sim)"
typical_cases="${INFONCE_RATE_CASES_TYPICAL:-20000}"
default_cases="${INFONCE_RATE_CASES_DEFAULT:-4000}"
pin=()
if command -v taskset >/dev/null && taskset -c 0 true 2>/dev/null; then pin=(taskset -c 0); fi

# CPU seconds (user + system) of one campaign: on a machine shared with other
# work, wall time measures the neighbours; with INFONCE_RATE_WALL=1, wall time.
seconds_of() {
  local limits="$1" cases="$2" oracle="$3" start end times
  times=$(mktemp)
  start=$(date +%s.%N)
  /usr/bin/time -f '%U %S' -o "$times" "${pin[@]}" "$sim" check --seed 1 --cases "$cases" \
    --limits "$limits" --jobs 1 --oracle "$oracle" --no-corpus >/dev/null ||
    die "check --limits $limits --oracle $oracle failed"
  end=$(date +%s.%N)
  if [[ "${INFONCE_RATE_WALL:-0}" == 1 ]]; then
    awk -v a="$start" -v b="$end" 'BEGIN { printf "%.6f\n", b - a }'
  else
    awk '{ printf "%.6f\n", $1 + $2 }' "$times"
  fi
  rm -f "$times"
}
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //') ($(nproc) CPUs), ${pin[*]:-not pinned}, load $(cut -d' ' -f1 /proc/loadavg)"
printf '%-10s %-8s %8s %12s\n' limits oracle cases "cases/s"
for limits in typical default; do
  cases=$typical_cases
  [[ $limits == default ]] && cases=$default_cases
  every=() off=()
  for run in 1 2 3 4 5; do
    every+=("$(seconds_of "$limits" "$cases" every)")
    off+=("$(seconds_of "$limits" "$cases" off)")
  done
  t_every=$(printf '%s\n' "${every[@]}" | median)
  t_off=$(printf '%s\n' "${off[@]}" | median)
  printf '%-10s %-8s %8d %12.0f\n' "$limits" every "$cases" "$(awk -v n="$cases" -v t="$t_every" 'BEGIN { print n / t }')"
  printf '%-10s %-8s %8d %12.0f\n' "$limits" off "$cases" "$(awk -v n="$cases" -v t="$t_off" 'BEGIN { print n / t }')"
  awk -v a="$t_every" -v b="$t_off" -v l="$limits" 'BEGIN { printf "%-10s every/off time ratio %.3f\n", l, a / b }'
done
