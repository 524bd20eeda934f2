#!/usr/bin/env python3
"""`check --sut` sends the next case ahead, and nothing more (sut/session.hpp).

    send_ahead_test.py INFONCE_SIM WORKDIR

A fake SUT (fake_sut.py log) records every request. Asserts, on a passing
campaign:
  * the SUT received one request per case sent (run minus discarded), each
    once, besides the uncompensated follow-ups: nothing sent ahead was wasted
    or sent twice;
  * requests went ahead: some uncompensated check (the case again, compensate
    false) came after the next case's request, which the harness had sent
    before judging the case; never more than one case in between;
  * the verdicts are those of the same campaign with --jobs 2.
"""
import json
import os
import shlex
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def run(infonce_sim, work, jobs):
    log = os.path.join(work, "requests-jobs%d.jsonl" % jobs)
    if os.path.exists(log):
        os.remove(log)
    sut = " ".join(shlex.quote(word) for word in
                   [sys.executable, os.path.join(HERE, "fake_sut.py"), "log", infonce_sim, log])
    report = os.path.join(work, "report-jobs%d.json" % jobs)
    command = [infonce_sim, "check", "--sut", sut, "--seed", "3", "--cases", "300", "--jobs",
               str(jobs), "--no-corpus", "--report", report]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        fail("check --sut exited %d:\n%s%s" % (done.returncode, done.stdout[-2000:],
                                                done.stderr[-2000:]))
    with open(log) as f:
        requests = [json.loads(line) for line in f]
    with open(report) as f:
        return requests, json.load(f)


def main():
    infonce_sim, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    requests, report = run(infonce_sim, work, 1)
    tally = report["tally"]
    # A follow-up (the uncompensated check of a case the SUT answered) is the
    # case again with compensate false, padded with the SUT's own draws.
    keys = [json.dumps(dict(case, compensate=True, padding_draws=None), sort_keys=True)
            for case in requests]
    gaps = []  # per follow-up: the cases requested between it and its case
    cases = []  # the requests that are not follow-ups, in order
    position = {}  # key -> index in `cases` of the case with compensate true
    for j, case in enumerate(requests):
        if not case["compensate"] and keys[j] in position:
            gaps.append(len(cases) - position[keys[j]] - 1)
            continue
        if case["compensate"]:
            position[keys[j]] = len(cases)
        cases.append(json.dumps(case, sort_keys=True))
    sent = tally["cases_run"] - tally["discarded"]
    if len(cases) != sent or len(set(cases)) != sent:
        fail("the SUT got %d case requests (%d distinct); the report has %d cases sent (%d run, "
             "%d discarded)" % (len(cases), len(set(cases)), sent, tally["cases_run"],
                                tally["discarded"]))
    if len(gaps) < 10:
        fail("only %d uncompensated follow-ups: the test needs a campaign with more" % len(gaps))
    if max(gaps) > 1:
        fail("a follow-up came %d cases after its case (at most one may be ahead)" % max(gaps))
    ahead = sum(1 for gap in gaps if gap == 1)
    if ahead == 0:
        fail("no request went ahead: every uncompensated check came right after its case")
    again, report2 = run(infonce_sim, work, 2)
    if report2["tally"] != tally or len(again) != len(requests):
        fail("--jobs 2 gave another tally or another number of requests than --jobs 1")
    print("PASS: %d requests = %d cases sent + %d uncompensated follow-ups; %d of these came "
          "after the next case, sent ahead" % (len(requests), sent, len(gaps), ahead))


if __name__ == "__main__":
    main()
