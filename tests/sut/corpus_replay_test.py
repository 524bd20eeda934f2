#!/usr/bin/env python3
"""`corpus replay` with --sut: what a FAIL line says, and what --help offers.

    corpus_replay_test.py INFONCE_SIM WORKDIR

- A SUT whose gradient is wrong (serve-sut under the scale-by-world mutant) fails a case of
  W=4, P=2 with a FAIL line that names the gradient's ratio to the reference (W / P = 2
  here: the mutant scales the backward by W = 4 where the fix scales by P = 2).
- `corpus replay --help` lists only options the command accepts (no --restrict, which it
  rejects: generation is not its business).
Exit 0 when both hold.
"""
import json
import os
import shlex
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def main():
    sim, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(os.path.join(work, "cases"))
    # A real-trainer case of W = 4, P = 2 (a gather, two replicas per shard).
    source = os.path.join(os.path.dirname(HERE), "..", "corpus", "real-trainer", "cases")
    chosen = sorted(name for name in os.listdir(source) if name.startswith("w4d2-"))[0]
    shutil.copy(os.path.join(source, chosen), os.path.join(work, "cases", chosen))
    case = json.load(open(os.path.join(work, "cases", chosen)))
    case.pop("expect", None)  # judged by the properties, not by a recorded result
    json.dump(case, open(os.path.join(work, "cases", chosen), "w"))
    sut = " ".join(shlex.quote(w) for w in [sim, "serve-sut", "--mutant", "scale-by-world"])
    done = subprocess.run([sim, "corpus", "replay", os.path.join(work, "cases"), "--sut", sut],
                          capture_output=True, text=True, timeout=300)
    if done.returncode != 1:
        fail("corpus replay --sut exited %d, expected 1:\n%s%s"
             % (done.returncode, done.stdout, done.stderr))
    lines = [line for line in done.stdout.splitlines() if line.startswith("FAIL")]
    if len(lines) != 1 or "gradient ratio 2 of the reference" not in lines[0]:
        fail("the FAIL line does not name the gradient ratio 2:\n" + done.stdout)
    print("PASS: " + lines[0])
    helped = subprocess.run([sim, "corpus", "replay", "--help"], capture_output=True, text=True)
    if helped.returncode != 0 or "--sut-timeout" not in helped.stdout:
        fail("corpus replay --help:\n" + helped.stdout + helped.stderr)
    if "--restrict" in helped.stdout:
        fail("corpus replay --help offers --restrict, which the command rejects:\n" + helped.stdout)
    print("PASS: corpus replay --help offers only what it accepts")
    return 0


if __name__ == "__main__":
    sys.exit(main())
