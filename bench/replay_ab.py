#!/usr/bin/env python3
"""The torch worker's CPU per request on recorded requests, two python/ trees side by side.

    replay_ab.py REQUESTS [--baseline DIR] [--rounds N] [--chunk K]

REQUESTS: infonce-sut/1 request lines recorded from a campaign, e.g.
    infonce-sim check --sut 'tee REQUESTS | PYTHONPATH=python .venv/bin/python -m \
      infonce_sim.worker --adapter conformance' --seed 1 --cases 2000 --limits typical \
      --jobs 1 --no-corpus
(--jobs 1: one worker, so one writer of REQUESTS).

Each round answers every request with this checkout's python/ and, with --baseline (another
python/ directory, e.g. `git archive OLD python | tar -x -C /tmp/old` gives /tmp/old/python),
with that tree's too, in one process on one torch: chunks of K requests alternate between
the two (which goes first alternates too), so a noisy machine slows both alike. Prints the
CPU milliseconds per request of each (process time, the worker's Worker.answer only: no
start-up, no pipes), their ratio, and how many responses differ byte for byte. The
conformance adapter on the in-process runtime; the baseline tree is imported under another
package name, so it must import itself only relatively (checked).
"""

import argparse
import ast
import importlib
import io
import pathlib
import shutil
import sys
import tempfile
import time

CURRENT = "infonce_sim"
BASELINE = "infonce_sim_baseline"


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("requests", type=pathlib.Path)
    parser.add_argument("--baseline", type=pathlib.Path, metavar="DIR",
                        help="another python/ directory (holding infonce_sim/)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--chunk", type=int, default=50)
    args = parser.parse_args()
    if args.baseline and not (args.baseline / CURRENT / "worker.py").is_file():
        parser.error(f"--baseline {args.baseline}: no {CURRENT}/worker.py in it")
    if args.rounds < 1 or args.chunk < 1:
        parser.error("--rounds and --chunk must be >= 1")
    return args


def alias_baseline(directory, scratch):
    """Copy DIR/infonce_sim to SCRATCH/infonce_sim_baseline, importable beside the current."""
    target = scratch / BASELINE
    shutil.copytree(directory / CURRENT, target, ignore=shutil.ignore_patterns("__pycache__"))
    for path in target.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level
                     else [])
            if any(name.split(".")[0] == CURRENT for name in names):
                raise SystemExit(f"replay_ab: {path.name} imports {CURRENT} absolutely: "
                                 "the baseline would run the current code there")
    sys.path.insert(0, str(scratch))


def make_worker(package):
    """A Worker of `package` (conformance adapter, in-process runtime) writing to a buffer."""
    adapters = importlib.import_module(f"{package}.adapters")
    worker = _found(package, "Worker", ("runtime.worker", "worker"))
    runtime = _found(package, "InProcessRuntime",
                     ("runtime.inprocess_runtime", "inprocess_runtime", "inprocess"))
    adapter = adapters.load_adapter({"kind": "conformance", "max_world": 8})
    return lambda: worker(adapter, runtime(), io.StringIO())


def _found(package, name, modules):
    """`name` from the first of `modules` (under `package`) defining it: a baseline may be older
    than the module that holds it now."""
    for module in modules:
        try:
            found = getattr(importlib.import_module(f"{package}.{module}"), name, None)
        except ImportError:
            continue
        if found is not None:
            return found
    raise SystemExit(f"replay_ab: {package} has no {name}")


def replay(factories, lines, rounds, chunk):
    """CPU seconds per package over `rounds` passes, and the last pass's responses."""
    seconds = {name: 0.0 for name in factories}
    outputs = {}
    for r in range(rounds):
        workers = {name: make() for name, make in factories.items()}
        for k, start in enumerate(range(0, len(lines), chunk)):
            order = list(workers) if (k + r) % 2 == 0 else list(reversed(list(workers)))
            for name in order:
                begin = time.process_time()
                for line in lines[start:start + chunk]:
                    workers[name].answer(line)
                seconds[name] += time.process_time() - begin
        outputs = {name: w.out.getvalue().splitlines() for name, w in workers.items()}
    return seconds, outputs


def main():
    args = parse_args()
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "python"))
    import torch
    torch.set_num_threads(1)  # as the worker does
    try:
        lines = [line for line in args.requests.read_text().splitlines() if line.strip()]
    except OSError as e:
        raise SystemExit(f"replay_ab: {args.requests}: {e.strerror}") from None
    if not lines:
        raise SystemExit(f"replay_ab: {args.requests}: no requests")
    with tempfile.TemporaryDirectory() as scratch:
        factories = {CURRENT: make_worker(CURRENT)}
        if args.baseline:
            alias_baseline(args.baseline, pathlib.Path(scratch))
            factories[BASELINE] = make_worker(BASELINE)
        seconds, outputs = replay(factories, lines, args.rounds, args.chunk)
    answered = args.rounds * len(lines)
    print(f"# {len(lines)} requests x {args.rounds} rounds, torch {torch.__version__}")
    print(f"current: {1e3 * seconds[CURRENT] / answered:.3f} CPU ms/request")
    if args.baseline:
        print(f"baseline ({args.baseline}): {1e3 * seconds[BASELINE] / answered:.3f} CPU ms/request")
        print(f"current / baseline: {seconds[CURRENT] / seconds[BASELINE]:.3f}")
        differ = sum(a != b for a, b in zip(outputs[CURRENT], outputs[BASELINE]))
        print(f"responses differing byte for byte: {differ} of {len(lines)}")
    print(f"# load average at the end: {open('/proc/loadavg').read().split()[:3]}")


if __name__ == "__main__":
    main()
