#!/usr/bin/env bash
# cli_failures.sh INFONCE_SIM MPIRUN CORPUS_DIR: `infonce-sim run --backend
# mpi` failures end the whole job with `infonce-sim: error: ...` on stderr
# and the CLI's exit code, never a hang.
set -u
sim=$1
mpirun=$2
corpus=$3
here=$(dirname "$0")
mpi=("$mpirun" --allow-run-as-root --oversubscribe --mca pml ob1 --mca btl self,vader)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
expect() {  # expect NAME CODE PATTERN COMMAND...
  local name=$1
  shift
  echo "== $name"
  bash "$here/expect_failure.sh" "$@" || failures=$((failures + 1))
}

expect "world size differs from mesh.world" 2 \
  '^infonce-sim: error: mesh.world: the case has 4 world ranks but the MPI job has 2 processes' \
  "${mpi[@]}" -np 2 "$sim" run --backend mpi --case "$corpus/w4d2-000-fixed.json" --json

echo '{"format": "infonce-case/1"}' >"$work/bad.json"
fiber_error=$("$sim" run --case "$work/bad.json" 2>&1 >/dev/null)
expect "invalid case file: the fiber backend's message" 2 "^$(printf '%s' "$fiber_error" | sed 's/[][\.*^$(){}+?|]/\\&/g')\$" \
  "${mpi[@]}" -np 2 "$sim" run --backend mpi --case "$work/bad.json"

expect "missing case file" 2 '^infonce-sim: error: .*nowhere.json: cannot read' \
  "${mpi[@]}" -np 2 "$sim" run --backend mpi --case "$work/nowhere.json"

expect "unknown mutant" 2 "^infonce-sim: error: run: unknown --mutant 'nope'" \
  "${mpi[@]}" -np 2 "$sim" run --backend mpi --case "$corpus/w2d2-000-fixed.json" --mutant nope

# Ranks 1..3 throw InputError inside the step while rank 0 waits in a collective.
expect "ranks throw inside the step" 2 \
  '^infonce-sim: error: world rank [123]: (own slot [23] is outside the 2 gathered shards|labels describe)' \
  "${mpi[@]}" -np 4 "$sim" run --backend mpi --case "$corpus/w4d2-000-fixed.json" \
  --mutant own-slot-at-world-rank --json

expect "--schedule-seed is fiber-only" 2 '^infonce-sim: error: run: --schedule-seed is for --backend fiber' \
  "$sim" run --backend mpi --schedule-seed 3 --case "$corpus/w2d2-000-fixed.json"
expect "unknown backend" 2 "^infonce-sim: error: run: unknown --backend 'gpu'" \
  "$sim" run --backend gpu --case "$corpus/w2d2-000-fixed.json"
expect "MPI options need --backend mpi" 2 '^infonce-sim: error: run: --mpi-allreduce and --stall-timeout need --backend mpi' \
  "$sim" run --mpi-allreduce --case "$corpus/w2d2-000-fixed.json"

echo "$failures failure(s)"
exit $((failures > 0))
