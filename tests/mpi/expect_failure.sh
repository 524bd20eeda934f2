#!/usr/bin/env bash
# expect_failure.sh CODE PATTERN COMMAND...: COMMAND (an mpirun) must end
# within 60 s with exit code CODE and PATTERN (an extended regex) on stderr.
# A hang is killed by timeout (exit 124) and fails the test.
set -u
code=$1
pattern=$2
shift 2
err=$(mktemp)
trap 'rm -f "$err"' EXIT
timeout 60 "$@" >/dev/null 2>"$err"
got=$?
grep -E '^[a-z_-]+: error: ' "$err"  # the programs' own lines, not mpirun's chatter
if [ "$got" -eq 124 ]; then
  echo "FAIL: the job hung (killed after 60 s)"
  exit 1
fi
if [ "$got" -ne "$code" ]; then
  echo "FAIL: exit code $got, expected $code"
  exit 1
fi
if ! grep -E -q -- "$pattern" "$err"; then
  echo "FAIL: stderr does not match: $pattern"
  exit 1
fi
echo "ok: exit $got, stderr matches '$pattern'"
