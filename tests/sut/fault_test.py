#!/usr/bin/env python3
"""One fault of the SUT channel (tests/sut/fake_sut.py MODE) against `check --sut`.

    fault_test.py MODE INFONCE_SIM WORKDIR

Asserts the outcome the protocol documents (docs/sut-protocol.md, "Faults"):
the exit code, the one line naming the problem, the report still written with
every finished case counted, and no hang (each run has a hard limit). Prints
one row of the fault table. Exit 0 when every assertion holds.
"""
import json
import os
import shlex
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
LIMIT_SECONDS = 100  # a hang of the harness fails the test instead of blocking ctest

# mode -> (exit code, text the output must contain, where: "out" or "err")
EXPECTED = {
    "crash": (1, ["step-runs: the SUT exited (exit status 3)",
                  "RuntimeError: simulated crash in the loss"], "out"),
    "hang": (1, ["step-runs: no response in 2 s (--sut-timeout); killed",
                 "fake SUT: hanging"], "out"),
    "junk": (1, ["step-runs: malformed response: response: not a JSON line: "
                 "'Epoch 1: loss=0.25"], "out"),
    "wrong-shape": (1, ["step-runs: malformed response: response.grad: expected"], "out"),
    "missing-key": (1, ["step-runs: malformed response: response.losses: missing key"], "out"),
    "lie": (1, ["step-runs: the SUT reported an error: gather tensor: not implemented"], "out"),
    "early-exit": (2, ["handshake: none came: the SUT exited (exit status 0)",
                       "giving up before the handshake"], "err"),
    "wrong-version": (2, ["handshake.protocol: the SUT speaks 'infonce-sut/2', "
                          "this harness speaks 'infonce-sut/1'"], "err"),
    "no-handshake": (2, ["handshake: none came: no response in 2 s"], "err"),
}


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def run_check(mode, infonce_sim, work, jobs):
    marker = os.path.join(work, "hang-marker")  # one path: it is part of the reported command
    if os.path.exists(marker):
        os.remove(marker)
    sut = " ".join(shlex.quote(word) for word in
                   [sys.executable, os.path.join(HERE, "fake_sut.py"), mode, infonce_sim, marker])
    report = os.path.join(work, "report-jobs%d.json" % jobs)
    if os.path.exists(report):
        os.remove(report)
    # 2 s where the fault is a hang; elsewhere room for a loaded machine's
    # startup, which must not turn another fault into a timeout.
    timeout = "2" if mode in ("hang", "no-handshake") else "60"
    command = [infonce_sim, "check", "--sut", sut, "--sut-timeout", timeout, "--cases", "200",
               "--jobs", str(jobs), "--no-corpus", "--report", report,
               "--report", os.path.join(work, "report-jobs%d.xml" % jobs)]
    start = time.monotonic()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=LIMIT_SECONDS)
    except subprocess.TimeoutExpired:
        fail("%s: check --sut did not end within %d s (a hang)" % (mode, LIMIT_SECONDS))
    for stream, text in (("out", done.stdout), ("err", done.stderr)):
        with open(os.path.join(work, "check-jobs%d.%s" % (jobs, stream)), "w") as f:
            f.write(text)
    return done, report, time.monotonic() - start


def check_report(mode, report_path, out):
    if not os.path.exists(report_path):
        fail("%s: the report %s was not written" % (mode, report_path))
    with open(report_path) as f:
        report = json.load(f)
    failure = report["failure"]
    if report["result"] != "failed" or failure["property"] != "step-runs":
        fail("%s: expected a step-runs failure in the report" % mode)
    tally = report["tally"]
    # No finished result lost: every case before the failing one is counted.
    if tally["cases_run"] != failure["case_index"] + 1:
        fail("%s: cases_run %d, failing index %d" % (mode, tally["cases_run"],
                                                     failure["case_index"]))
    if tally["property_checks"]["step-runs"] != tally["cases_run"] - tally["discarded"]:
        fail("%s: step-runs was not counted for every case" % mode)
    if "--sut '" not in failure["reproduce"][0]:
        fail("%s: the reproduce command lacks --sut: %s" % (mode, failure["reproduce"][0]))
    return report


def main():
    mode, infonce_sim, work = sys.argv[1], sys.argv[2], sys.argv[3]
    os.makedirs(work, exist_ok=True)
    code, needles, stream = EXPECTED[mode]
    done, report_path, seconds = run_check(mode, infonce_sim, work, 1)
    text = done.stdout if stream == "out" else done.stderr
    if done.returncode != code:
        fail("%s: exit %d, expected %d\nstdout: %s\nstderr: %s" %
             (mode, done.returncode, code, done.stdout[-2000:], done.stderr[-2000:]))
    for needle in needles:
        if needle not in text:
            fail("%s: %r not in the output:\n%s" % (mode, needle, text[-3000:]))
    if code == 2:
        lines = done.stderr.strip().splitlines()
        if len(lines) != 1:
            fail("%s: expected one line on stderr, got %d:\n%s" % (mode, len(lines), done.stderr))
        summary = lines[0]
        row = "no report (nothing ran)"
    else:
        report = check_report(mode, report_path, done.stdout)
        failure = report["failure"]
        summary = [f["detail"] for f in failure["failures"] if f["property"] == "step-runs"][0]
        row = "case %d of %d run, shrunk in %d steps, report written" % (
            failure["case_index"], report["tally"]["cases_run"], failure["shrink_steps"])
        # A deterministic fault gives the same report with two SUT processes.
        if mode != "hang":
            again, again_path, _ = run_check(mode, infonce_sim, work, 2)
            if again.stdout != done.stdout:
                fail("%s: --jobs 2 printed another report than --jobs 1" % mode)
            with open(report_path) as a, open(again_path) as b:
                if a.read() != b.read():
                    fail("%s: --jobs 2 wrote another JSON report than --jobs 1" % mode)
            row += "; --jobs 2 identical"
    print("| %s | exit %d | %s | %s | %.1f s |" % (mode, done.returncode, summary[:160], row,
                                                   seconds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
