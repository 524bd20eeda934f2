#!/usr/bin/env bash
# check/replay/corpus replay --sut against the harness's own deterministic SUT
# (`infonce-sim serve-sut`): the correct step passes, a mutant fails as the
# campaign says, the report bytes do not depend on --jobs, the reproduce
# command reproduces, and a narrow handshake restricts generation.
#   serve_sut_test.sh INFONCE_SIM WORKDIR
set -u
sim=$1
work=$2
here=$(cd "$(dirname "$0")" && pwd)
source_dir=$(cd "$here/../.." && pwd)
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
expect_exit() {  # expect_exit CODE WHAT COMMAND...
  local code=$1 what=$2
  shift 2
  timeout 600 "$@" >"$what.out" 2>"$what.err"
  local got=$?
  [ "$got" = "$code" ] || fail "$what: exit $got, expected $code: $(head -c 2000 "$what.err" "$what.out")"
}
contains() {  # contains FILE TEXT
  grep -qF -- "$2" "$1" || fail "$1 lacks '$2': $(head -c 3000 "$1")"
}

serve="$sim serve-sut"

# 1. The correct step passes, and the report says which SUT ran.
expect_exit 0 pass1 "$sim" check --sut "$serve" --cases 300 --jobs 1 \
  --report pass1.json --report pass1.xml --report pass1.svg
contains pass1.out "PASSED: every property held on every case"
contains pass1.out "sut: infonce-sim serve-sut (the harness's own rank program on fibers)"
contains pass1.out "uncompensated-ratio-is-1/P: checked"
contains pass1.json '"command": "'"$serve"'"'
# The same seed gives the same bytes with two SUT processes.
expect_exit 0 pass2 "$sim" check --sut "$serve" --cases 300 --jobs 2 \
  --report pass2.json --report pass2.xml --report pass2.svg
for kind in out json xml svg; do
  cmp -s "pass1.$kind" "pass2.$kind" || fail "--jobs 1 and --jobs 2 differ in pass.$kind"
done

# 2. A mutant behind the channel: the gradient is exactly 1/P, shrunk to W=2 P=2.
mutant="$sim serve-sut --mutant no-compensation"
expect_exit 1 mutant1 "$sim" check --sut "$mutant" --cases 300 --jobs 1 --corpus-dir found \
  --report mutant1.json --report mutant1.xml --report mutant1.svg
contains mutant1.out "gradient-matches-reference"
contains mutant1.out "ratio 0.5"
contains mutant1.out "shrunk:   W=2 P=2 A=1"
# The reproduce lines start with the program as it was invoked.
contains mutant1.out "reproduce: $sim replay --seed 1 --case-index"
contains mutant1.out "--sut '$mutant'"
contains mutant1.out "saved:    found/case-"
expect_exit 1 mutant2 "$sim" check --sut "$mutant" --cases 300 --jobs 2 --corpus-dir found \
  --report mutant2.json --report mutant2.xml --report mutant2.svg
for kind in out json xml svg; do
  cmp -s "mutant1.$kind" "mutant2.$kind" || fail "--jobs 1 and --jobs 2 differ in mutant.$kind"
done

# 3. The printed reproduce commands reproduce: the same shrunk case, the same file.
replay=$(sed -n "s|^  reproduce: $sim ||p" mutant1.out)
eval "expect_exit 1 replay \"\$sim\" $replay"
grep '^  shrunk:' mutant1.out >shrunk.expected
grep '^  shrunk:' replay.out >shrunk.got
cmp -s shrunk.expected shrunk.got || fail "replay --sut shrank to another case"
saved=$(sed -n 's/^  saved:    //p' mutant1.out)
expect_exit 1 replay_file "$sim" replay "$saved" --sut "$mutant"
contains replay_file.out "gradient-matches-reference"
expect_exit 0 replay_file_fixed "$sim" replay "$saved" --sut "$serve"
contains replay_file_fixed.out "PASSED"

# 4. The repository's corpus through the SUT: every case it can run passes.
expect_exit 0 corpus "$sim" corpus replay "$source_dir/corpus" --sut "$serve"
contains corpus.out " 0 failed"
expect_exit 1 corpus_mutant "$sim" corpus replay "$source_dir/corpus" --sut "$mutant"

# 5. A narrow handshake: generation stays inside it and the report lists the axes.
narrow="python3 $here/fake_sut.py narrow $sim"
expect_exit 0 narrow "$sim" check --sut "$narrow" --cases 300 --report narrow.json
contains narrow.out "restricted: world <= 4 (the distribution has 64)"
contains narrow.out "restricted: replicas <= 1"
contains narrow.out "restricted: gather: object only"
contains narrow.out "restricted: hard_negatives: unset only"
# No hard negatives declared: no padding either, so none to report.
! grep -qF "padding: legacy" narrow.out || fail "narrow.out reports a padding mode the SUT never pads with"
contains narrow.out "  gather: object=300"
contains narrow.out "  replicas: 1=300"

# 6. Misuse: one line, exit 2.
expect_exit 2 bad_timeout "$sim" check --sut "$serve" --sut-timeout soon
contains bad_timeout.err "--sut-timeout must be a duration"
expect_exit 2 no_sut "$sim" check --sut-timeout 5
contains no_sut.err "--sut-timeout needs --sut CMD"
expect_exit 2 mutant_and_sut "$sim" check --sut "$serve" --mutant no-compensation
contains mutant_and_sut.err "--mutant changes the harness's own step"
expect_exit 2 missing_command "$sim" check --sut "/nonexistent/sut" --cases 5
contains missing_command.err "handshake: none came: the SUT exited (exit status 127)"

if [ "$failures" -gt 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "serve-sut: all checks passed"
