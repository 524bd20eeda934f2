#!/usr/bin/env bash
# check --strategies POINT --sut: the Python conformance adapter with one point baked in
# (--option strategy=X) judged at point Y passes when X = Y, and fails, shrunk and
# reproducible by index and by file, when X and Y differ: also where Y predicts no single
# ratio and X is exactly correct (any multiple of the reference fits that prediction).
# Skips (exit 77) when python/ or torch are absent.
#   strategy_pairs_test.sh INFONCE_SIM PYTHON_DIR TORCH_PYTHON WORKDIR
set -u
sim=$1 python_dir=$2 torch_python=$3 work=$4
skip() { echo "SKIP: $*"; exit 77; }
[ -f "$python_dir/infonce_sim/worker.py" ] || skip "no Python worker at $python_dir/infonce_sim"
"$torch_python" -c 'import torch' 2>/dev/null || skip "$torch_python cannot import torch"
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
sut() { echo "PYTHONPATH=$python_dir $torch_python -m infonce_sim.worker --adapter conformance --option strategy=$1"; }
judge() {  # judge CODE NAME RUNS JUDGED_AT [SEED]: a short strategy campaign, its exit code
  local code=$1 name=$2 runs=$3 at=$4 seed=${5:-1}
  timeout 600 "$sim" check --strategies "$at" --cases 40 --limits typical --seed "$seed" \
    --sut "$(sut "$runs")" --corpus-dir "$work/$name" --report "$work/$name.json" \
    >"$name.out" 2>"$name.err"
  local got=$?
  [ "$got" = "$code" ] || fail "$name: exit $got, expected $code: $(tail -c 2000 "$name.out" "$name.err")"
}
reproduces() {  # every reproduce command of NAME's report exits 1
  local name=$1 command
  while IFS= read -r command; do
    [ -n "$command" ] || continue
    (eval "$command") >"$name.again" 2>&1
    [ $? = 1 ] || fail "$name: the reproducer did not exit 1: $command: $(tail -c 1500 "$name.again")"
  done < <("$torch_python" -c '
import json, sys
for group in json.load(open(sys.argv[1]))["mismatches"]:
    print(group["cases"][0]["reproduce"])
    if group.get("shrunk", {}).get("reproduce"):
        print(group["shrunk"]["reproduce"])' "$name.json")
}

correct=autograd/global/scale-1/mean
judge 0 same "$correct" "$correct"
# A correct step judged at a point whose gradient is no multiple of the reference.
judge 1 correct_at_dropped "$correct" detached-own-live/local/scale-1/mean
reproduces correct_at_dropped
# Two points that both predict no single ratio, and differ.
judge 1 local_pair detached/local/scale-1/mean detached-own-live/local/scale-1/mean
reproduces local_pair
# A ratio point judged at the correct one.
judge 1 scaled_at_correct autograd/local/scale-P/mean "$correct"
grep -qF "shrunk in" scaled_at_correct.out || fail "scaled_at_correct: no shrunk case: $(tail -c 1500 scaled_at_correct.out)"

# The gather's group (issue 29, finding 8): a tevatron-like trainer gathers over the world
# (torch's default group, the own slot at the world rank) and scales its loss by W. With
# replicas its gradient is correct and its loss is the reference's plus log R: it passes
# at its own point and fails at its dp twin (the point `strategies` used to give it).
tevatron=detached-own-live/global/scale-W/mean/world
judge 0 tevatron_same "$tevatron" "$tevatron"
judge 1 tevatron_at_dp "$tevatron" detached-own-live/global/scale-W/mean
reproduces tevatron_at_dp
judge 1 dp_at_tevatron detached-own-live/global/scale-W/mean "$tevatron"
# Other gathers over the world: the adapter's torch world gather is the rank program's
# (seed 2 has a padded case with replicas: each copy padded by its own draws).
judge 0 world_autograd autograd/global/scale-W/sum/world autograd/global/scale-W/sum/world 2
judge 0 world_detached_local detached/local/scale-1/sum/world detached/local/scale-1/sum/world 2

# classify names the point the adapter runs (each of these is alone in its class on the
# designed cases: no other point is predicted alike on every shape).
for point in autograd/local/scale-P/mean detached/global/scale-W/sum "$tevatron"; do
  name=classify_${point//\//_}
  timeout 600 "$sim" classify --sut "$(sut "$point")" >"$name.out" 2>"$name.err"
  got=$?
  [ "$got" = 0 ] || fail "$name: exit $got, expected 0: $(tail -c 2000 "$name.out" "$name.err")"
  grep -qxF "  $point" "$name.out" || fail "$name: $point is not among the matches: $(cat "$name.out")"
  grep -qF "matches 1 point:" "$name.out" || fail "$name: more than one point matches: $(cat "$name.out")"
done

# Without replicas (max_replicas=1, as open_clip's adapter declares) nothing tells a point
# from its world twin: classify names both, as equivalent on every case tried.
point=detached-own-live/global/scale-1/mean
timeout 600 "$sim" classify --sut "$(sut "$point") --option max_replicas=1" >no_replicas.out 2>&1
got=$?
[ "$got" = 0 ] || fail "no_replicas: exit $got, expected 0: $(tail -c 2000 no_replicas.out)"
grep -qF "matches 2 points (equivalent on every case tried):" no_replicas.out &&
  grep -qxF "  $point" no_replicas.out && grep -qxF "  $point/world" no_replicas.out ||
  fail "no_replicas: not the point and its world twin alone: $(cat no_replicas.out)"

if [ "$failures" -gt 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "the conformance adapter at its own point passes (a world-group point too); at other points it fails and reproduces"
