#!/usr/bin/env python3
"""`check --sut` against an honest SUT whose handshake narrows an axis (tests/sut/fake_sut.py).

    handshake_test.py MODE INFONCE_SIM WORKDIR

MODE is one of fake_sut.py's honest SUTs. Such a SUT answers an error for any request
outside its handshake, so a campaign that strays outside it fails. Without the "-bug" suffix
the SUT is correct: `check` must pass and its report must name the narrowed axis. With
"-bug" a faulty case's gradient is doubled (rank-local-bug: every rank reports the global
loss, not its own rows'): `check` must fail on gradient-matches-reference (not on a request
outside the handshake), and every reproduce command it prints (by file and by index) must
give the same verdict, exit 1. Exit 0 when every assertion holds.
"""
import json
import os
import shlex
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
LIMIT_SECONDS = 300
# Under the sanitizers (about 10x slower) a third of the cases: a faulty case (1 in 23) still
# comes within the first 100.
SANITIZED = os.environ.get("INFONCE_SANITIZER_BUILD") == "1"
PASSING_CASES, FAILING_CASES = (50, 100) if SANITIZED else (150, 300)

# mode -> lines the report of a passing campaign must contain
EXPECTED = {
    "equal-batches": ["restricted: unequal batches: none"],
    "synced-only": ["restricted: rng.mode: synced only"],
    "uniform": ["restricted: documents per query: the same for every query",
                "restricted: shapes: the same on every rank"],
    "clip-only": ["restricted: family: clip only"],
    "rank-local": ["reported loss: rank-local"],
    "decline": ["declined by the SUT: ", "x a faulty seed"],
}


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def run(command, what):
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=LIMIT_SECONDS,
                              shell=isinstance(command, str))
    except subprocess.TimeoutExpired:
        fail(what + ": no exit within %d s" % LIMIT_SECONDS)
    return done


def check_passes(mode, sim, sut, work):
    done = run([sim, "check", "--sut", sut, "--cases", str(PASSING_CASES), "--limits", "typical",
                "--no-corpus"], "check")
    if done.returncode != 0:
        fail("check on the honest '%s' SUT exited %d, expected 0:\n%s%s"
             % (mode, done.returncode, done.stdout[-3000:], done.stderr[-2000:]))
    for line in EXPECTED[mode]:
        if line not in done.stdout:
            fail("the report lacks '%s':\n%s" % (line, done.stdout[-3000:]))
    print("PASS: check --sut '%s' passes and names the axis" % mode)


def check_fails_and_reproduces(mode, sim, sut, work):
    corpus = os.path.join(work, "found")
    shutil.rmtree(corpus, ignore_errors=True)
    report = os.path.join(work, "report.json")
    done = run([sim, "check", "--sut", sut, "--cases", str(FAILING_CASES), "--limits", "typical",
                "--corpus-dir", corpus, "--report", report], "check")
    if done.returncode != 1:
        fail("check on '%s' exited %d, expected 1:\n%s%s"
             % (mode, done.returncode, done.stdout[-3000:], done.stderr[-2000:]))
    failure = json.load(open(report))["failure"]
    properties = [f["property"] for f in failure["failures"]]
    if "gradient-matches-reference" not in properties or "step-runs" in properties:
        fail("the shrunk failure is %s, expected gradient-matches-reference (the doubled "
             "gradient), not step-runs:\n%s" % (properties, done.stdout[-3000:]))
    commands = failure["reproduce"]
    if len(commands) < 2:
        fail("expected a reproducer by index and one by file, got %s" % commands)
    for command in commands:
        again = run(command, command)
        if again.returncode != 1:
            fail("the reproducer exited %d, expected 1 (the campaign's verdict):\n  %s\n%s%s"
                 % (again.returncode, command, again.stdout[-2000:], again.stderr[-2000:]))
        if "gradient-matches-reference" not in again.stdout:
            fail("the reproducer does not show the campaign's failure:\n  %s\n%s"
                 % (command, again.stdout[-2000:]))
    print("PASS: check --sut '%s' fails on the gradient; %d reproducers give exit 1"
          % (mode, len(commands)))


def main():
    mode, sim, work = sys.argv[1], sys.argv[2], sys.argv[3]
    os.makedirs(work, exist_ok=True)
    sut = " ".join(shlex.quote(word) for word in
                   [sys.executable, os.path.join(HERE, "fake_sut.py"), mode, sim])
    if mode.endswith("-bug"):
        check_fails_and_reproduces(mode, sim, sut, work)
    else:
        check_passes(mode, sim, sut, work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
