#!/usr/bin/env bash
# Splits the instructions of a P = 8 step between the loss arithmetic
# (loss/, libm, Eigen inlined into loss/) and the simulation (sim/, Boost
# Fiber/Context, the rank program's gather/assemble bookkeeping, malloc).
# Usage: bench/overhead.sh BUILD_DIR
set -euo pipefail
build="${1:-build}"
out=$(mktemp)
valgrind --tool=callgrind --callgrind-out-file="$out" "$build/bench/p8_step_bench" 200 >/dev/null 2>&1
callgrind_annotate --auto=no --threshold=100 "$out" 2>/dev/null | awk '
  /^ *[0-9,]+ +\(/ {
    n = $1; gsub(",", "", n); line = $0
    if (line ~ /PROGRAM TOTALS/) { total = n; next }
    if (line ~ /malloc|free|operator new|operator delete|memcpy|memmove|memset/) cat = "allocation and copies"
    else if (line ~ /infonce::sim|sim\/|boost::fibers|boost::context|fcontext|libboost/) cat = "simulation (fibers, collectives)"
    else if (line ~ /infonce::loss|loss\/|libm\.so|e_exp|e_log|w_exp|s_sin|math_config|Eigen::internal/) cat = "loss arithmetic (loss/, Eigen, libm)"
    else if (line ~ /infonce::step|step\//) cat = "rank program bookkeeping (gather, assemble)"
    else cat = "other"
    sum[cat] += n
  }
  END {
    for (c in sum) printf "%-36s %14.0f  %5.1f%%\n", c, sum[c], 100 * sum[c] / total
    printf "%-36s %14.0f\n", "total", total
  }' | sort -k1,1
rm -f "$out"
