#!/usr/bin/env bash
# SigLIP (SPEC section 15) through the external-SUT channel, end to end: the harness's own
# rank program (serve-sut) behind a handshake that runs only SigLIP (its first line edited:
# families ["siglip"], the "family" key). check --strategies all --family siglip judges every
# case through the channel (PASS); plain check --sut sends SigLIP cases without a strategy,
# which serve-sut runs at the trainer's own point, P x the full-batch gradient of log_scale
# and bias (docs/strategies.md): a failure, shrunk, that replays by file with the same finding.
#   siglip_channel_test.sh INFONCE_SIM WORKDIR
set -u
sim=$1 work=$2
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
cat >sut.sh <<SUT
#!/bin/sh
"$sim" serve-sut | {
  read -r handshake
  printf '%s\n' "\$handshake" | sed 's/"extension_keys":\[/"families":["siglip"],"extension_keys":["family",/'
  cat
}
SUT
chmod +x sut.sh
timeout 300 "$sim" check --strategies all --family siglip --sut ./sut.sh --cases 200 >strategies.out 2>&1
code=$?
[ "$code" = 0 ] || fail "strategies: exit $code: $(tail -c 1500 strategies.out)"
grep -q '^step: the SUT infonce-sim serve-sut' strategies.out || fail "strategies: the SUT did not run"
grep -q '^PASS: every observed outcome is the predicted one (200 cases)' strategies.out ||
  fail "strategies: $(tail -3 strategies.out)"
timeout 300 "$sim" check --sut ./sut.sh --cases 50 --corpus-dir "$work/found" >check.out 2>&1
code=$?
[ "$code" = 1 ] || fail "check: exit $code, expected 1: $(tail -c 1500 check.out)"
grep -q 'direct parameters (log_scale, bias) differ, ratio 2' check.out ||
  fail "check: not the trainer's P x on log_scale and bias: $(tail -c 1500 check.out)"
file=$(ls "$work"/found/*.json 2>/dev/null | head -1)
if [ -z "$file" ]; then
  fail "check: no case file saved"
else
  grep -q '"family": "siglip"' "$file" || fail "the saved case is not a SigLIP case"
  timeout 120 "$sim" replay "$file" --sut ./sut.sh >replay.out 2>&1
  code=$?
  [ "$code" = 1 ] || fail "replay --sut: exit $code, expected 1: $(tail -c 1500 replay.out)"
  grep -q 'direct parameters (log_scale, bias) differ, ratio 2' replay.out ||
    fail "replay --sut: $(tail -c 1500 replay.out)"
fi
[ "$failures" = 0 ] && echo "siglip channel: PASS" || exit 1
