#!/usr/bin/env bash
# Every build type with every supported compiler, warnings as errors: each cell
# configures its own build directory through scripts/setup.sh (-DINFONCE_WERROR=ON)
# and builds everything it enables (the libraries, the CLI, and by default the tests
# and benchmarks). Prints one row per cell: compiler, build type, result, seconds.
# Exit 1 when a cell fails (its log is kept); 0 when every cell builds clean.
#
# Usage: scripts/build-matrix.sh [WORK_DIR]        (default build-matrix)
#   INFONCE_MATRIX  the cells, "COMPILER:TYPE ..." (default: g++ and clang++-14, each with
#                   Debug Release RelWithDebInfo MinSizeRel)
#   INFONCE_MATRIX_ARGS  extra cmake arguments for every cell (for example
#                   "-DBUILD_TESTING=OFF -DINFONCE_BENCH=OFF": the libraries and the CLI only)
# GCC's flow-based warnings (-Wrestrict, -Wmaybe-uninitialized, -Wstringop-*) depend on the
# optimisation level, which is why each type is its own cell. Not run by scripts/test.sh
# (eight full builds take about an hour on 2 cores); CI builds three of the cells.
set -euo pipefail
cd "$(dirname "$0")/.."
work_dir=${1:-build-matrix}
cells=${INFONCE_MATRIX:-}
if [[ -z $cells ]]; then
  for compiler in g++ clang++-14; do
    for type in Debug Release RelWithDebInfo MinSizeRel; do cells+="$compiler:$type "; done
  done
fi
read -r -a extra_args <<<"${INFONCE_MATRIX_ARGS:-}"

die() {
  echo "build-matrix: error: $*" >&2
  exit 2
}
for cell in $cells; do
  [[ $cell == *:* ]] || die "cell '$cell' is not COMPILER:TYPE"
  case ${cell#*:} in
    Debug | Release | RelWithDebInfo | MinSizeRel) ;;
    *) die "cell '$cell': unknown build type '${cell#*:}'" ;;
  esac
  [[ ${cell%%:*} != clang++-14 ]] || scripts/setup.sh --packages-only clang-14 >/dev/null
  command -v "${cell%%:*}" >/dev/null || die "cell '$cell': compiler '${cell%%:*}' not found"
done

mkdir -p "$work_dir"
failed=0
rows=()
for cell in $cells; do
  compiler=${cell%%:*} type=${cell#*:}
  dir=$work_dir/${compiler//+/x}-$type
  log=$dir.log
  start=$SECONDS
  echo "build-matrix: $compiler $type in $dir (log $log)"
  if scripts/setup.sh "$dir" -DCMAKE_BUILD_TYPE="$type" -DCMAKE_CXX_COMPILER="$compiler" \
    "${extra_args[@]}" >"$log" 2>&1; then
    result="clean"
  else
    result="FAILED: $(grep -m1 -E 'error|warning' "$log" || tail -n 1 "$log")"
    failed=1
  fi
  rows+=("| $compiler | $type | $result | $((SECONDS - start)) |")
done
echo "| compiler | build type | result (-Werror) | seconds |"
echo "|---|---|---|---|"
printf '%s\n' "${rows[@]}"
exit "$failed"
