#!/usr/bin/env bash
# Regenerates bench/scaling.md and bench/scaling.svg: how a simulated step's
# cost grows with P and with the global batch, and memory per rank up to 4096
# ranks (bench/scaling_bench.cpp says what is measured and how). A few
# minutes on 2 cores; times are thread CPU time, so a busy machine changes them
# less than wall time, but run it on a quiet one.
# Usage: bench/scaling.sh BUILD_DIR [scaling_bench options, e.g. --cap-seconds 10]
set -euo pipefail
die() {
  echo "scaling.sh: error: $*" >&2
  exit 2
}
[[ $# -ge 1 ]] || die "usage: bench/scaling.sh BUILD_DIR [scaling_bench options]"
build="$1"
shift
bench="$build/bench/scaling_bench"
[[ -x "$bench" ]] || die "$bench not found (ninja -C $build scaling_bench)"
out="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
"$bench" --out "$out" "$@" >/dev/null
echo "wrote $out/scaling.md and $out/scaling.svg"
