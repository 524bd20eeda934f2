#!/usr/bin/env bash
# check_same_report.sh INFONCE_SIM MPIRUN: `mpirun -np 4 infonce-sim
# check-mpi ...` (shard i/4 per process, merged on rank 0) must print the same
# report as the single-process `infonce-sim check ...`, exit with the same
# code and save the same corpus file; in every output format, passing and
# failing.
set -u
sim=$1
mpirun=$2
mpi=("$mpirun" --allow-run-as-root --oversubscribe --mca pml ob1 --mca btl self,vader)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
failures=0
mpi_command=(check-mpi)
compare() {  # compare NAME OPTIONS...
  local name=$1
  shift
  rm -rf corpus-one corpus-four
  "$sim" check "$@" --corpus-dir corpus-one >single.out 2>single.err
  local single_code=$?
  timeout 120 "${mpi[@]}" -np 4 "$sim" "${mpi_command[@]}" "$@" --corpus-dir corpus-four >sharded.out 2>sharded.err
  local sharded_code=$?
  # The corpus directory is named in the report; it is the only difference allowed.
  sed -i "s#corpus-four#corpus-one#g" sharded.out
  if [ "$single_code" -ne "$sharded_code" ]; then
    echo "FAIL $name: exit $sharded_code on 4 processes, $single_code on one"
    grep -E '^[a-z-]+: error' sharded.err
    failures=$((failures + 1))
  elif ! cmp -s single.out sharded.out; then
    echo "FAIL $name: the merged report differs from the single-process report"
    diff single.out sharded.out | head -5
    failures=$((failures + 1))
  elif ! diff -r corpus-one corpus-four >/dev/null 2>&1 && [ -e corpus-one -o -e corpus-four ]; then
    echo "FAIL $name: the saved corpus files differ"
    failures=$((failures + 1))
  else
    echo "same  $name: exit $sharded_code, $(wc -c <sharded.out) bytes, $(ls corpus-one 2>/dev/null | wc -l) corpus file(s)"
  fi
}
compare "seed 7, 300 cases, json" --seed 7 --cases 300 --format json
compare "seed 11, 100 cases (2 blocks for 4 shards), junit" --seed 11 --cases 100 --format junit
compare "seed 5, 400 typical cases, human" --seed 5 --cases 400 --limits typical
compare "mutant no-compensation, human" --seed 3 --cases 600 --mutant no-compensation
compare "mutant per-rank-rng, json" --seed 3 --cases 600 --mutant per-rank-rng --format json
# `check --backend mpi` is the same command under the issue's spelling.
mpi_command=(check --backend mpi)
compare "check --backend mpi, seed 7, 300 cases, json" --seed 7 --cases 300 --format json
echo "$failures failure(s)"
exit $((failures > 0))
