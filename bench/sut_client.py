#!/usr/bin/python3
"""A minimal infonce-sut/1 client for bench/sut_throughput.sh: times a SUT's steps.

    sut_client.py --jobs N --sut "CMD" [--warm-up] CASE_DIR

Starts N copies of CMD (sh -c), reads their handshakes, keeps the case files inside
what the handshake supports, and sends them round robin (case i to SUT i mod N,
one request at a time per SUT, the N SUTs in parallel). With --warm-up every SUT
first runs one case of each world size untimed (real DDP spawns its rank pool then).
Prints one JSON line: cases, errors, seconds (wall, from the first timed request
to the last response), cases_per_s, and cpu_seconds: the CPU time (user + system)
the SUT processes and all their descendants (real DDP's rank processes) used over
the timed part, from /proc; on a shared machine cases per CPU second is the fair
comparison (a mode with W processes per case gets more of a contended machine).
It judges nothing: `infonce-sim check --sut` does that; this only times the step.

    sut_client.py --time-command "CMD"

runs CMD (sh -c) and prints {"seconds", "cpu_seconds"} (CMD's and its descendants').
"""

import argparse
import json
import os
import pathlib
import resource
import subprocess
import sys
import threading
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "python"))

from infonce_sim.cases.case_families import parse_case  # noqa: E402
from infonce_sim.runtime.worker import outside_supports  # noqa: E402


def _process_table():
    """pid -> (ppid, utime + stime in ticks) of every process visible in /proc."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        table[int(entry)] = (int(fields[1]), int(fields[11]) + int(fields[12]))
    return table


def cpu_seconds(roots):
    """CPU seconds used so far by the processes `roots` and every live descendant."""
    table = _process_table()
    children = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    total, stack = 0, list(roots)
    while stack:
        pid = stack.pop()
        if pid in table:
            total += table[pid][1]
        stack.extend(children.get(pid, []))
    return total / os.sysconf("SC_CLK_TCK")


def time_command(command):
    """Wall time and CPU time of CMD and every descendant (SUTs in their own process groups
    included), sampled from /proc every 20 ms: the last value seen for each process."""
    start = time.monotonic()
    proc = subprocess.Popen(["/bin/sh", "-c", command])
    last = {}
    while proc.poll() is None:
        table = _process_table()
        children = {}
        for pid, (ppid, _) in table.items():
            children.setdefault(ppid, []).append(pid)
        stack = [proc.pid]
        while stack:
            pid = stack.pop()
            if pid in table:
                last[pid] = max(last.get(pid, 0), table[pid][1])
            stack.extend(children.get(pid, []))
        time.sleep(0.02)
    seconds = time.monotonic() - start
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    sampled = sum(last.values()) / os.sysconf("SC_CLK_TCK")
    print(json.dumps({"seconds": round(seconds, 3),
                      "cpu_seconds": round(max(sampled, usage.ru_utime + usage.ru_stime), 3)}))


class Sut:
    def __init__(self, command):
        self.proc = subprocess.Popen(["/bin/sh", "-c", command], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, bufsize=1)
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"sut_client: {command!r} exited before its handshake")
        self.handshake = json.loads(line)
        self.next_id = 0
        self.errors = 0

    def step(self, case):
        self.proc.stdin.write(json.dumps({"id": self.next_id, "case": case}) + "\n")
        self.proc.stdin.flush()
        response = json.loads(self.proc.stdout.readline())
        assert response["id"] == self.next_id, response
        self.next_id += 1
        self.errors += "error" in response
        return response

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=120)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--sut")
    parser.add_argument("--warm-up", action="store_true")
    parser.add_argument("--time-command", metavar="CMD")
    parser.add_argument("cases", nargs="?")
    args = parser.parse_args()
    if args.time_command:
        return time_command(args.time_command)
    if not args.sut or not args.cases:
        parser.error("--sut CMD and CASE_DIR are required")
    suts = [Sut(args.sut) for _ in range(args.jobs)]
    supports = suts[0].handshake["supports"]
    cases = []
    for path in sorted(pathlib.Path(args.cases).glob("*.json")):
        obj = json.loads(path.read_text())
        obj.pop("expect", None)
        obj.pop("found", None)
        if outside_supports(parse_case(obj), supports) is None:
            cases.append(obj)
    if args.warm_up:
        first_of_world = {}
        for c in cases:
            first_of_world.setdefault(c["mesh"]["world"], c)
        threads = [threading.Thread(target=lambda s=s: [s.step(c) for c in first_of_world.values()])
                   for s in suts]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for s in suts:
            s.errors = 0
    shares = [cases[i::args.jobs] for i in range(args.jobs)]
    threads = [threading.Thread(target=lambda s=s, share=share: [s.step(c) for c in share])
               for s, share in zip(suts, shares)]
    roots = [s.proc.pid for s in suts]
    cpu_start = cpu_seconds(roots)
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.monotonic() - start
    cpu = cpu_seconds(roots) - cpu_start
    for s in suts:
        s.close()
    print(json.dumps({"sut": suts[0].handshake["name"], "cases": len(cases),
                      "errors": sum(s.errors for s in suts), "seconds": round(seconds, 3),
                      "cases_per_s": round(len(cases) / seconds, 2),
                      "cpu_seconds": round(cpu, 3)}))


if __name__ == "__main__":
    main()
