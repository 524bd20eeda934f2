#!/usr/bin/env bash
# Mutation testing of loss/ by source patches (docs/mutation-testing.md).
#
#   scripts/mutation-test.sh [PATCH...]      (default: every tests/mutation/patches/*.patch)
#
# For each patch: restore a copy of the tree's loss/ (under build/mutation/),
# apply the patch there (patch -p1 --fuzz=2, so small context changes in
# loss/ do not break it), rebuild infonce-sim in that copy (ccache keeps this
# to the one changed file and the link), then run `check --profile ci` twice:
# with the oracle (oracle-agrees on, --oracle sampled: the ci default) and
# with --oracle off (what the campaign judged before the oracle). Prints one
# markdown table row per patch: caught or not, cases until caught, the shrunk
# case, and the properties the shrunk case fails (the first is the one the
# campaign reports). Exit status 1 if some patch escapes
# the oracle-on run. The working tree itself is never modified.
#
# Environment: MUTATION_DIR (default build/mutation; the copy is MUTATION_DIR/tree), MUTATION_CASES (default:
# the ci profile's budget), JOBS (campaign threads, default 2).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/toolchain.sh"
# What it runs beyond the build: patch, and jq to read the campaign's JSON. Installed when
# missing (root or sudo), as scripts/setup.sh installs the build's packages.
"$root/scripts/setup.sh" --packages-only patch jq >&2
work=${MUTATION_DIR:-$root/build/mutation}
tree=$work/tree
build=$tree/build
jobs=${JOBS:-2}
cases_option=()
if [[ -n "${MUTATION_CASES:-}" ]]; then cases_option=(--cases "$MUTATION_CASES"); fi

if [[ $# -gt 0 ]]; then
  patches=("$@")
else
  patches=("$root"/tests/mutation/patches/*.patch)
fi
for p in "${patches[@]}"; do
  [[ -f "$p" ]] || { echo "mutation-test: no patch file '$p'" >&2; exit 2; }
done

# A copy of the sources (no build tree, no git metadata), configured once.
copy_tree() {
  mkdir -p "$tree"
  for entry in "$root"/*; do
    name=$(basename "$entry")
    [[ "$name" == build || "$name" == loss ]] && continue  # loss/: restore_loss
    # Unchanged entries keep their copy (and its mtimes, so nothing rebuilds).
    if ! diff -rq "$entry" "$tree/$name" >/dev/null 2>&1; then
      rm -rf "${tree:?}/$name"
      cp -a "$entry" "$tree/$name"
    fi
  done
}
# Copies back only the files that differ, with a fresh mtime, so that ninja
# rebuilds exactly what the previous patch touched.
restore_loss() {
  local file
  for file in "$root"/loss/*; do
    cmp -s "$file" "$tree/loss/$(basename "$file")" || cp "$file" "$tree/loss/"
  done
  rm -f "$tree"/loss/*.orig "$tree"/loss/*.rej
}

copy_tree
mkdir -p "$tree/loss"
restore_loss

# The copy's build directory is seeded from the tree's own build/ (object
# files kept, absolute paths rewritten), so a patch recompiles one file and
# relinks; without a build/ the copy is configured and built from scratch.
if [[ ! -f "$build/build.ninja" ]]; then
  if [[ -f "$root/build/build.ninja" ]]; then
    mkdir -p "$build"
    # Never the mutation copies themselves (MUTATION_DIR may sit under build/).
    (cd "$root/build" && tar cf - --exclude='./mutation*' .) | (cd "$build" && tar xpf -)
    grep -rlI --include='*.ninja' --include='CMakeCache.txt' --include='*.cmake' \
      --include='*.make' -e "$root" "$build" | xargs -r sed -i "s#$root#$tree#g"
  else
    launcher=()  # ccache only where it is installed
    if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
    cmake -S "$tree" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      "${launcher[@]}" >"$work/configure.log" 2>&1 ||
      { echo "mutation-test: configuring the copy failed (see $work/configure.log)" >&2; exit 3; }
  fi
fi

# run_check NAME MODE -> "caught|cases|property|shrunk" from the campaign's JSON.
run_check() {
  local name=$1 mode=$2 json="$work/$1.$2.json" status=0
  "$build/infonce-sim" check --profile ci "${cases_option[@]}" --jobs "$jobs" --oracle "$mode" \
    --no-corpus --format json >"$json" 2>"$work/$name.$mode.err" || status=$?
  if [[ $status -gt 1 ]]; then
    echo "crash|-|exit $status|-"
    return
  fi
  jq -r 'if .failure == null then "no|\(.tally.cases_run)|-|-"
         else "yes|\(.failure.case_index + 1)|\([.failure.failures[].property] | join(" + "))|\(.failure.shrunk)" end' "$json"
}

escaped=0
echo "| patch | oracle on: caught | cases until caught | caught by | shrunk case | oracle off: caught | cases until caught | caught by |"
echo "|---|---|---|---|---|---|---|---|"
for p in "${patches[@]}"; do
  name=$(basename "$p" .patch)
  restore_loss
  if ! patch -p1 --fuzz=2 --silent -d "$tree" <"$p" >"$work/$name.patch.log" 2>&1; then
    echo "| $name | does not apply (see $work/$name.patch.log) | | | | | | |"
    escaped=1
    continue
  fi
  if ! cmake --build "$build" --target infonce-sim >"$work/$name.build.log" 2>&1; then
    echo "| $name | does not build (see $work/$name.build.log) | | | | | | |"
    escaped=1
    continue
  fi
  IFS='|' read -r on_caught on_cases on_property on_shrunk <<<"$(run_check "$name" sampled)"
  IFS='|' read -r off_caught off_cases off_property _ <<<"$(run_check "$name" off)"
  [[ "$on_caught" == yes ]] || escaped=1
  [[ "$on_caught" == yes ]] || on_cases="(ran $on_cases)"
  [[ "$off_caught" == yes ]] || off_cases="(ran $off_cases)"
  echo "| $name | $on_caught | $on_cases | $on_property | $on_shrunk | $off_caught | $off_cases | $off_property |"
done
restore_loss
exit $escaped
