#!/usr/bin/env bash
# same_output.sh INFONCE_SIM MPIRUN CASE...: for each case, `infonce-sim run`
# on the fiber backend and `mpirun -np <mesh.world> infonce-sim run --backend
# mpi` must print the same bytes (JSON and the human table) and exit with the
# same code.
set -u
sim=$1
mpirun=$2
shift 2
flags=(--allow-run-as-root --oversubscribe --mca pml ob1 --mca btl self,vader)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
for case_file in "$@"; do
  world=$(grep -o '"world": *[0-9]*' "$case_file" | head -1 | grep -o '[0-9]*$')
  for format in --json ""; do
    "$sim" run --case "$case_file" $format >"$work/fiber" 2>&1
    fiber_code=$?
    timeout 60 "$mpirun" "${flags[@]}" -np "$world" "$sim" run --backend mpi --case "$case_file" \
      $format >"$work/mpi" 2>"$work/mpi-err"
    mpi_code=$?
    name="$(basename "$case_file") (world $world${format:+, $format})"
    if [ "$fiber_code" -ne "$mpi_code" ]; then
      echo "FAIL $name: exit $mpi_code on MPI, $fiber_code on fibers"
      failures=$((failures + 1))
    elif ! cmp -s "$work/fiber" "$work/mpi"; then
      echo "FAIL $name: MPI output differs from the fiber output"
      diff "$work/fiber" "$work/mpi" | head -5
      failures=$((failures + 1))
    else
      echo "same  $name: exit $mpi_code, $(wc -c <"$work/mpi") bytes"
    fi
  done
done
exit $((failures > 0))
