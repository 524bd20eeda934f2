#!/usr/bin/env bash
# check --sut on the Python worker (python/infonce_sim, torch): the conformance
# adapter passes; ms-swift's real InfonceLoss before the fix fails with the
# gradient ratio exactly 1/P, shrunk to W=2 P=2 and one group, and its legacy
# padding fails the padding property; the fixed files pass.
# Skips (exit 77) when python/, torch or the third-party files are absent.
#   python_worker_test.sh INFONCE_SIM PYTHON_DIR THIRD_PARTY TORCH_PYTHON WORKDIR [CASES [FIXED_CASES]]
# CASES (200) for the files that fail, ten times that for the conformance
# adapter (every axis, the default distribution); FIXED_CASES
# (default 10,000) for each fixed file; ctest passes 2,000 (tests/sut/CMakeLists.txt).
# Torch rounds in its own order: a float32 loss near 0 (torch 0.0, the
# reference 1.19e-07) is judged within the oracle's rounding bound
# (properties/sut_step.cpp); a case with a mask decision within rounding of a
# tie is not judged against the reference (either decision is right).
set -u
sim=$1 python_dir=$2 third_party=$3 torch_python=$4 work=$5 cases=${6:-200}
fixed_cases=${7:-10000}
swift=$third_party/ms-swift
skip() { echo "SKIP: $*"; exit 77; }
[ -f "$python_dir/infonce_sim/worker.py" ] || skip "no Python worker at $python_dir/infonce_sim"
"$torch_python" -c 'import torch' 2>/dev/null || skip "$torch_python cannot import torch"
for f in embedding.py embedding_fixed.py embedding_fixed_padding.py; do
  [ -f "$swift/swift/loss/$f" ] || skip "no $swift/swift/loss/$f (INFONCE_THIRD_PARTY)"
done
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
worker="PYTHONPATH=$python_dir $torch_python -m infonce_sim.worker"
swift_worker="$worker --adapter ms-swift --swift-root $swift --swift-file"
run() {  # run CODE NAME ARGS...: check --sut with a hard time limit
  local code=$1 name=$2
  shift 2
  timeout 1500 "$sim" check --no-corpus --jobs 2 "$@" >"$name.out" 2>"$name.err"
  local got=$?
  [ "$got" = "$code" ] || fail "$name: exit $got, expected $code: $(tail -c 1500 "$name.err" "$name.out")"
}
contains() { grep -qF -- "$2" "$1" || fail "$1 lacks '$2': $(tail -c 2000 "$1")"; }

run 0 conformance --sut "$worker --adapter conformance" --cases $((cases * 10))
contains conformance.out "PASSED"

# A deterministic SUT, the same seed: the same report bytes with one torch
# worker and with two (the reports carry no time), on a passing campaign of
# 1,000 cases and on a failure shrunk through the SUT.
same_bytes() {  # same_bytes NAME CODE CASES FILE
  local name=$1 code=$2 n=$3 file=$4 jobs
  for jobs in 1 2; do
    timeout 600 "$sim" check --no-corpus --jobs "$jobs" --sut "$swift_worker $file" \
      --restrict min_dim=2 --cases "$n" --report "$name$jobs.json" --report "$name$jobs.xml" \
      --report "$name$jobs.svg" >"$name$jobs.out" 2>"$name$jobs.err"
    [ $? = "$code" ] || fail "$name, --jobs $jobs: expected exit $code: $(tail -c 1500 "$name$jobs.err" "$name$jobs.out")"
  done
  for kind in out json xml svg; do
    cmp -s "${name}1.$kind" "${name}2.$kind" || fail "$name: --jobs 1 and --jobs 2 differ in .$kind"
  done
}
same_bytes bytes_pass 0 1000 embedding_fixed_padding.py
same_bytes bytes_fail 1 "$cases" embedding.py

run 1 before_fix --sut "$swift_worker embedding.py" --restrict hard_negatives=false --restrict min_dim=2 --cases "$cases"
contains before_fix.out "gradient-matches-reference"
grep -qE '^  gradient-matches-reference: .*, ratio 0\.5$' before_fix.out ||
  fail "before the fix: the gradient ratio is not 0.5 (1/P, P=2): $(grep gradient-matches before_fix.out)"
# One group, on either shard (the generator also gives rank 0 no group).
grep -E '^  shrunk:   W=2 P=2 A=1 negatives=\[\[(\[[0-9]+\],\[\]|\[\],\[[0-9]+\])\]\]' before_fix.out >/dev/null ||
  fail "before the fix: not shrunk to W=2 P=2 and one group: $(grep shrunk: before_fix.out)"

run 1 legacy_padding --sut "$swift_worker embedding.py" --restrict min_dim=2 --cases "$cases"
contains legacy_padding.out "padding-skips-positive"

run 0 fixed --sut "$swift_worker embedding_fixed.py" --restrict hard_negatives=false --restrict min_dim=2 --cases "$fixed_cases"
contains fixed.out "PASSED"
contains fixed.out "check: seed 1, $fixed_cases cases"

run 0 fixed_padding --sut "$swift_worker embedding_fixed_padding.py" --restrict min_dim=2 --cases "$fixed_cases"
contains fixed_padding.out "PASSED"
contains fixed_padding.out "check: seed 1, $fixed_cases cases"

if [ "$failures" -gt 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "python worker: all checks passed"
