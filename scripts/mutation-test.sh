#!/usr/bin/env bash
# Mutation testing by source patches (docs/mutation-testing.md).
#
#   scripts/mutation-test.sh [PATCH...]      (default: every tests/mutation/patches/*.patch)
#
# For each patch: restore a copy of the tree's patchable sources (loss/,
# step/, sim/, prediction/; under build/mutation/), apply the patch there
# (patch -p1 --fuzz=2, so small context changes do not break it), rebuild
# infonce-sim in that copy (ccache keeps this to the changed file and the
# link), then run six campaigns:
#   - `check --profile ci` with the oracle (--oracle sampled, the ci default)
#     and with --oracle off (what the campaign judged before the oracle);
#   - `check --strategies all --profile ci` (every strategy point and both
#     loss families, the CLIP family and learnable temperatures included) with
#     the oracle judging every case's reference, and with --oracle off;
#   - for each of the families neither campaign above draws (NT-Xent and
#     SigLIP): `check --strategies all --family F --cases 1000` (every point;
#     learnable temperatures, or SigLIP's log scale and bias) with the oracle
#     on every reference, and with --oracle off.
# Prints one markdown table row per patch: caught or not, cases until caught,
# the properties the shrunk case fails (the first is the one the campaign
# reports) and its size, and what each strategy campaign found. Exit status 1
# if some patch escapes both oracle-on runs. The working tree itself is never
# modified.
#
# Environment: MUTATION_DIR (default build/mutation; the copy is MUTATION_DIR/tree), MUTATION_CASES (default:
# the ci profile's budget), JOBS (campaign threads, default 2), MUTATION_STRATEGIES=0 (skip
# the two strategy campaigns), MUTATION_FAMILIES (default "ntxent siglip"; "" skips their
# campaigns), MUTATION_FAMILY_CASES (default 1000).
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

# The directories patches may change: restored file by file (restore_sources).
patchable=(loss step sim prediction)

# A copy of the sources (no build tree, no git metadata), configured once.
copy_tree() {
  mkdir -p "$tree"
  for entry in "$root"/*; do
    name=$(basename "$entry")
    [[ "$name" == build ]] && continue
    [[ " ${patchable[*]} " == *" $name "* ]] && continue  # restore_sources
    # Unchanged entries keep their copy (and its mtimes, so nothing rebuilds).
    if ! diff -rq "$entry" "$tree/$name" >/dev/null 2>&1; then
      rm -rf "${tree:?}/$name"
      cp -a "$entry" "$tree/$name"
    fi
  done
}
# Copies back only the files that differ, with a fresh mtime, so that ninja
# rebuilds exactly what the previous patch touched.
restore_sources() {
  local dir file relative
  for dir in "${patchable[@]}"; do
    while IFS= read -r -d '' file; do
      relative=${file#"$root"/}
      mkdir -p "$(dirname "$tree/$relative")"
      cmp -s "$file" "$tree/$relative" || cp "$file" "$tree/$relative"
    done < <(find "$root/$dir" -type f -print0)
    find "$tree/$dir" \( -name '*.orig' -o -name '*.rej' \) -delete
  done
}

copy_tree
restore_sources

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
  jq -r 'if .failure != null then
           "yes|\(.failure.case_index + 1)|\([.failure.failures[].property] | join(" + "))|\(.failure.shrunk_spec.world)/\(.failure.shrunk_spec.dp)/\([.failure.shrunk_spec.negatives[][][]] | length)"
         elif .result == "discard-budget-exceeded" then
           "yes|\(.tally.cases_run)|discard budget: \(.discard_budget.exceeded)|-"
         else "no|\(.tally.cases_run)|-|-" end' "$json"
}

# run_strategies NAME MODE [KIND OPTION...] -> "caught|mismatches|first mismatch" from the
# strategy campaign (KIND: the files' tag, default strategies; OPTIONs: the campaign's,
# default --profile ci).
run_strategies() {
  local name=$1 mode=$2 kind=${3:-strategies} status=0
  local options=("${@:4}")
  [[ ${#options[@]} -gt 0 ]] || options=(--profile ci)
  local text="$work/$name.$kind.$mode.txt"
  "$build/infonce-sim" check --strategies all "${options[@]}" --oracle "$mode" --no-corpus \
    >"$text" 2>"$work/$name.$kind.$mode.err" || status=$?
  if [[ $status -gt 1 ]]; then
    echo "crash|-|exit $status"
  elif grep -q '^PASS:' "$text"; then
    echo "no|0|-"
  else
    local count first
    count=$(sed -n 's/^FAIL: \([0-9]*\) of [0-9]* cases differ.*/\1/p' "$text")
    first=$(grep -m1 '^  ' "$text" | sed 's/^  //; s/|/\\|/g' | cut -c1-160)
    echo "yes|$count|$first"
  fi
}

# The families the two campaigns above do not draw, each run alone at every point.
read -r -a families <<<"${MUTATION_FAMILIES-ntxent siglip}"
declare -A family_title=([ntxent]=NT-Xent [siglip]=SigLIP)
for family in "${families[@]}"; do
  [[ -n "${family_title[$family]:-}" ]] ||
    { echo "mutation-test: MUTATION_FAMILIES: unknown family '$family' (ntxent, siglip)" >&2; exit 2; }
done

# family_cells NAME: sets cells (" on | off |" for each family: its strategy campaign, oracle
# on and off) and family_caught (yes when some family's campaign caught it with the oracle on).
family_cells() {
  local name=$1 family caught count first off_caught off_count options
  cells="" family_caught=no
  for family in "${families[@]}"; do
    options=(--family "$family" --cases "${MUTATION_FAMILY_CASES:-1000}")
    IFS='|' read -r caught count first <<<"$(run_strategies "$name" every "$family" "${options[@]}")"
    IFS='|' read -r off_caught off_count _ <<<"$(run_strategies "$name" off "$family" "${options[@]}")"
    [[ "$caught" == yes ]] && family_caught=yes && caught="yes ($count cases; $first)"
    [[ "$off_caught" == yes ]] && off_caught="yes ($off_count cases)"
    cells+=" $caught | $off_caught |"
  done
}

escaped=0
header="| patch | ci, oracle on: caught | cases until caught | properties | shrunk W/P/groups | ci, oracle off: caught | cases until caught | properties | strategies, oracle on | strategies, oracle off |"
rule="|---|---|---|---|---|---|---|---|---|---|"
for family in "${families[@]}"; do
  header+=" ${family_title[$family]} strategies, oracle on | ${family_title[$family]} strategies, oracle off |"
  rule+="---|---|"
done
echo "$header"
echo "$rule"
for p in "${patches[@]}"; do
  name=$(basename "$p" .patch)
  restore_sources
  if ! patch -p1 --fuzz=2 --silent -d "$tree" <"$p" >"$work/$name.patch.log" 2>&1; then
    echo "| $name | does not apply (see $work/$name.patch.log) |"
    escaped=1
    continue
  fi
  if ! cmake --build "$build" --target infonce-sim >"$work/$name.build.log" 2>&1; then
    echo "| $name | does not build (see $work/$name.build.log) |"
    escaped=1
    continue
  fi
  IFS='|' read -r on_caught on_cases on_property on_shrunk <<<"$(run_check "$name" sampled)"
  IFS='|' read -r off_caught off_cases off_property _ <<<"$(run_check "$name" off)"
  s_on_caught=skipped s_off_caught=skipped
  if [[ "${MUTATION_STRATEGIES:-1}" == 1 ]]; then
    IFS='|' read -r s_on_caught s_on_count s_on_first <<<"$(run_strategies "$name" every)"
    IFS='|' read -r s_off_caught s_off_count _ <<<"$(run_strategies "$name" off)"
  fi
  family_cells "$name"
  # Caught with the oracle on by some campaign: the ci one, the strategy one, or a family's.
  [[ "$on_caught" == yes || "$s_on_caught" == yes || "$family_caught" == yes ]] || escaped=1
  [[ "$on_caught" == yes ]] || on_cases="(ran $on_cases)"
  [[ "$off_caught" == yes ]] || off_cases="(ran $off_cases)"
  s_on="$s_on_caught"
  [[ "$s_on_caught" == yes ]] && s_on="yes ($s_on_count cases; $s_on_first)"
  s_off="$s_off_caught"
  [[ "$s_off_caught" == yes ]] && s_off="yes ($s_off_count cases)"
  echo "| $name | $on_caught | $on_cases | $on_property | $on_shrunk | $off_caught | $off_cases | $off_property | $s_on | $s_off |$cells"
done
restore_sources
exit $escaped
