#!/usr/bin/env bash
# Cases per second of `infonce-sim check` on one core, on the default and the
# "typical" generator distributions: the median of 5 runs (wall time, the
# process pinned to CPU 0 when taskset works). With a second build directory
# (e.g. a build of an older commit) both are run interleaved, run for run, and
# the ratio is printed: a speed-up measured side by side on one machine.
#
# Usage: bench/check_rate.sh BUILD_DIR [BASELINE_BUILD_DIR]
#   INFONCE_RATE_CASES_TYPICAL (default 20000), INFONCE_RATE_CASES_DEFAULT (default 4000)
set -euo pipefail

die() {
  echo "check_rate.sh: error: $*" >&2
  exit 2
}

[[ $# -ge 1 && $# -le 2 ]] || die "usage: bench/check_rate.sh BUILD_DIR [BASELINE_BUILD_DIR]"
builds=("$1")
[[ $# == 2 ]] && builds+=("$2")
for build in "${builds[@]}"; do
  [[ -x "$build/infonce-sim" ]] || die "$build/infonce-sim not found (ninja -C $build infonce-sim)"
done
typical_cases="${INFONCE_RATE_CASES_TYPICAL:-20000}"
default_cases="${INFONCE_RATE_CASES_DEFAULT:-4000}"
for n in "$typical_cases" "$default_cases"; do
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || die "case counts must be whole numbers >= 1, not '$n'"
done

pin=()
if command -v taskset >/dev/null && taskset -c 0 true 2>/dev/null; then pin=(taskset -c 0); fi

# Seconds of one campaign (the report goes to /dev/null; a failure is an error).
seconds_of() {
  local sim="$1" limits="$2" cases="$3" start end
  start=$(date +%s.%N)
  "${pin[@]}" "$sim" check --seed 1 --cases "$cases" --limits "$limits" --no-corpus >/dev/null ||
    die "$sim check --limits $limits failed"
  end=$(date +%s.%N)
  awk -v a="$start" -v b="$end" 'BEGIN { printf "%.6f\n", b - a }'
}

median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //') ($(nproc) CPUs), ${pin[*]:-not pinned}"
printf '%-10s %-28s %8s %12s\n' limits build cases "cases/s"
for limits in typical default; do
  cases=$typical_cases
  [[ $limits == default ]] && cases=$default_cases
  declare -A times=()
  for run in 1 2 3 4 5; do
    for build in "${builds[@]}"; do
      times[$build]+="$(seconds_of "$build/infonce-sim" "$limits" "$cases") "
    done
  done
  rates=()
  for build in "${builds[@]}"; do
    seconds=$(tr ' ' '\n' <<<"${times[$build]}" | grep . | median)
    rate=$(awk -v n="$cases" -v s="$seconds" 'BEGIN { printf "%.0f", n / s }')
    rates+=("$rate")
    printf '%-10s %-28s %8d %12s\n' "$limits" "$build" "$cases" "$rate"
  done
  if [[ ${#rates[@]} == 2 ]]; then
    awk -v a="${rates[0]}" -v b="${rates[1]}" -v l="$limits" \
      'BEGIN { printf "%-10s speed-up %.2fx (median of 5, interleaved)\n", l, a / b }'
  fi
  unset times
done
