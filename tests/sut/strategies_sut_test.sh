#!/usr/bin/env bash
# check --strategies --sut (issue 13, point 7): the strategy campaign through
# the Python worker on the in-process torch runtime.
#   - open_clip's real ClipLoss (../shared/third_party/open_clip, never
#     copied), its four option combinations, each judged at the strategy point
#     docs/strategies.md gives it: every case lands where step/strategy.hpp
#     predicts (the default and local_loss alone are wrong, as predicted);
#   - the same file judged at a point it does not implement fails (the
#     harness can tell the combinations apart);
#   - the conformance adapter, which takes the strategy key, at every point
#     of both families.
# Skips (exit 77) when python/, torch or the third-party file are absent.
#   strategies_sut_test.sh INFONCE_SIM PYTHON_DIR THIRD_PARTY TORCH_PYTHON WORKDIR [CASES]
set -u
sim=$1 python_dir=$2 third_party=$3 torch_python=$4 work=$5 cases=${6:-300}
open_clip=$third_party/open_clip
skip() { echo "SKIP: $*"; exit 77; }
[ -f "$python_dir/infonce_sim/worker.py" ] || skip "no Python worker at $python_dir/infonce_sim"
"$torch_python" -c 'import torch' 2>/dev/null || skip "$torch_python cannot import torch"
[ -f "$open_clip/src/open_clip/loss.py" ] || skip "no $open_clip/src/open_clip/loss.py (INFONCE_THIRD_PARTY)"
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
worker="PYTHONPATH=$python_dir $torch_python -m infonce_sim.worker"
clip_worker="$worker --adapter open-clip --open-clip-root $open_clip"
run() {  # run CODE NAME ARGS...: a strategy campaign with a hard time limit
  local code=$1 name=$2
  shift 2
  timeout 900 "$sim" check --seed 1 "$@" >"$name.out" 2>"$name.err"
  local got=$?
  [ "$got" = "$code" ] || fail "$name: exit $got, expected $code: $(tail -c 1500 "$name.err" "$name.out")"
}
contains() { grep -qF -- "$2" "$1" || fail "$1 lacks '$2': $(tail -c 2000 "$1")"; }
# The row of POINT in NAME.out: "cases disc f32m correct ratio counter no-cex other mismatch ..."
row() { awk -v p="clip $2" '$1 " " $2 == p { print $3, $4, $5, $6, $7, $8, $9, $10, $11, $12 }' "$1.out"; }

# option combination, the point it implements, the wrong outcome it must show, its options.
while read -r name point wrong options; do
  run 0 "$name" --strategies "$point" --family clip --cases "$cases" --sut "$clip_worker $options"
  contains "$name.out" "PASS: every observed outcome is the predicted one ($cases cases)"
  read -r total disc f32m correct ratio counter nocex other mismatch direct <<<"$(row "$name" "$point")"
  [ "${total:-0}" = "$cases" ] || fail "$name: $total cases in the row, expected $cases"
  [ "${disc:-1}" = 0 ] || fail "$name: $disc cases discarded"
  [ "${direct:-0}" = "$cases" ] || fail "$name: the logit scale judged on $direct cases, expected $cases"
  case $wrong in
    ratio) [ "${ratio:-0}" -gt 0 ] || fail "$name: no case showed the predicted ratio 1/P" ;;
    counter) [ "${counter:-0}" -gt 0 ] || fail "$name: no counterexample to a single ratio" ;;
    none) [ "$((ratio + counter))" = 0 ] || fail "$name: wrong cases at a correct point" ;;
  esac
  echo "$name ($point): $total cases, correct $correct, ratio $ratio, counterexamples $counter, logit scale as predicted $direct"
done <<'TABLE'
default detached-own-live/global/scale-1/mean ratio --option=local_loss=false
local_loss detached/local/scale-1/mean counter --option=local_loss=true
gather_with_grad autograd/global/scale-1/mean none --option=gather_with_grad=true
both autograd/local/scale-1/mean none --option=local_loss=true --option=gather_with_grad=true
TABLE

# Judged at the fixed point, open_clip's default (which is 1/P) fails.
run 1 default_as_fixed --strategies autograd/global/scale-1/mean --family clip --cases 100 \
  --sut "$clip_worker"
contains default_as_fixed.out "FAIL: "
contains default_as_fixed.out "predicted correct"

# The conformance adapter runs every point it is sent, both families.
run 0 conformance --strategies all --cases "$cases" --sut "$worker --adapter conformance"
contains conformance.out "PASS: every observed outcome is the predicted one ($cases cases)"
contains conformance.out "clip autograd/local/scale-1/mean"
contains conformance.out "infonce autograd/local/scale-1/mean"

if [ "$failures" -gt 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "strategies through the SUT: open_clip's four combinations as predicted, a wrong claim caught, conformance at every point"
