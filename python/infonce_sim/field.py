"""The measured field table: every built-in adapter configuration through `infonce-sim check --sut`.

    python3 -m infonce_sim.field [--sim PATH] [--cases K] [--seed S] [--out FILE]
        [--adapter NAME ...] [--match TEXT] [--runtime inprocess|ddp] [--corpus-dir DIR] [--python EXE]

For each adapter of `adapters.BUILT_IN` (read at run time), for each configuration its module
declares, on the INSTALLED version of the project: the worker's handshake, then

- InfoNCE family: `infonce-sim check --sut CMD` (the property campaign against the full-batch
  reference; a failure is shrunk and saved under --corpus-dir, its reproduce commands printed);
- NT-Xent family: as InfoNCE (the property campaign, then `check --strategies POINT --family
  ntxent` at the configuration's point).
- SigLIP family: as InfoNCE (the property campaign on SigLIP cases, shrunk on failure; a
  `_point` adds `check --strategies POINT --family siglip`).
- CLIP family (no shrinking campaign exists for it): `check --strategies POINT --sut CMD` at the
  configuration's own point (the encoders' and direct parameters' verdicts, each against the
  prediction of docs/strategies.md), and at `autograd/global/scale-1/mean`, the point whose
  prediction is the full-batch gradient for both groups: a failure there is a bug, reported
  with its first case (index and shape) and the command that reproduces it, and with a small
  case file (W = P = 2, one or two pairs per shard, written by this command under --corpus-dir
  since the engine does not shrink CLIP cases) that `infonce-sim replay FILE --sut CMD` fails.

Output: a markdown table on stdout and in --out FILE, then one row per adapter run: its lines
of code (issue 28's measure, infonce_sim/lines_of_code.py), the installed version, and its
configurations' verdicts. Exit 0 when every command ran (bugs found
are results, not errors), 2 on bad options or no infonce-sim binary.

## The convention an adapter module follows to appear in the table

Module-level names in `infonce_sim/adapters/<module>.py`, all optional (every BUILT_IN adapter
but `conformance` is a row; a module that fails to import, e.g. because it imports its package
at the top and the package is not installed, is one row saying so):

- `PACKAGE`: the distribution name on PyPI (default: the adapter's BUILT_IN name);
  `importlib.metadata.version(PACKAGE)` is the installed version shown; not installed: one row
  saying so, nothing run;
- `CONFIGURATIONS` (default `[{}]`: the adapter's defaults, one row): a list of dicts, one per
  configuration; each key/value is passed to the
  worker as `--option KEY=VALUE`, except reserved keys starting with `_`:
  `_label` (the configuration's name in the table; default the options), `_point` (the
  strategy point the configuration runs, e.g. `autograd/local/scale-1/mean`: the table then
  runs `check --strategies POINT` too, and for the CLIP family it is required), `_runtime`
  (`inprocess` or `ddp`: the worker's runtime for this configuration, default --runtime),
  `_restrict` (a list of `AXIS=VALUE` for `check --restrict`), `_version` (the version of
  what the configuration loads from a path rather than from the interpreter's installed
  PACKAGE, e.g. "file @ 3602360a": such a configuration runs even when PACKAGE is not
  installed);
- `NOT_EXPRESSIBLE`: a one-line reason why no configuration runs (shown instead of verdicts).
"""

import argparse
import hashlib
import importlib
import importlib.metadata
import json
import os
import pathlib
import re
import shlex
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]  # the checkout (python/infonce_sim/..)
FULL_BATCH_POINT = "autograd/global/scale-1/mean"  # predicted correct for both groups, any batch


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python3 -m infonce_sim.field",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--sim", default=os.environ.get("INFONCE_SIM") or
                        str(ROOT / "build" / "infonce-sim"), help="the infonce-sim binary")
    parser.add_argument("--cases", type=int, default=60, help="cases per check (default 60)")
    parser.add_argument("--seed", default="1")
    parser.add_argument("--out", metavar="FILE", help="also write the table here")
    parser.add_argument("--adapter", action="append", metavar="NAME",
                        help="only these built-in adapters (repeatable; default all)")
    parser.add_argument("--match", metavar="TEXT",
                        help="only configurations whose label contains TEXT")
    parser.add_argument("--runtime", choices=("inprocess", "ddp"), default="inprocess")
    parser.add_argument("--corpus-dir", default="out/field-cases",
                        help="where the shrunk and small failing cases go (default "
                        "out/field-cases: outside corpus/, which corpus replay reads)")
    parser.add_argument("--python", default=sys.executable, help="the worker's interpreter")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per command")
    parser.add_argument("--sut-timeout", metavar="S", help="check's --sut-timeout (default 60 s; "
                        "real DDP spawning W processes on a loaded machine may need more)")
    return parser.parse_args(argv)


# -- predictions (docs/strategies.md: ratio = kappa * s * b) -----------------------------------


def predicted(point, group):
    """The verdict docs/strategies.md derives for a parameter group at a point."""
    gather, scope, scale, reduction = point.split("/")
    if group == "encoders":
        b = {("detached-own-live", "global"): "1", ("detached", "global"): "0",
             ("autograd", "global"): "P", ("autograd", "local"): "P"}.get((gather, scope))
    else:
        b = "P"
    if b is None:
        return "no single ratio (dropped terms)"
    if b == "0":
        return "ratio 0"
    p = (b == "P") + (scale == "scale-P") - (reduction == "mean")
    w = int(scale == "scale-W")
    text = "".join(["P" * (p > 0), f"^{p}" * (p > 1), "W" * w]) or "1"
    text = text if p >= 0 else f"{text}/P" + (f"^{-p}" if p < -1 else "")
    verdict = "correct" if text == "1" else f"ratio {text}"
    return verdict + (", equal batches" if scope == "local" else "")


# -- running -----------------------------------------------------------------------------------


def worker_command(args, kind, options, runtime):
    parts = [args.python, "-m", "infonce_sim.worker", "--adapter", kind, "--runtime", runtime]
    for key, value in options.items():
        parts += ["--option", f"{key}={value}"]
    return (f"PYTHONPATH={shlex.quote(str(ROOT / 'python'))} "
            + " ".join(shlex.quote(p) for p in parts))


def handshake(command, timeout):
    """The worker's first line (stdin closed), or raise with its stderr's last line."""
    proc = subprocess.run(["/bin/sh", "-c", command], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=timeout)
    lines = proc.stdout.splitlines()
    if not lines:
        tail = (proc.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise RuntimeError(f"the worker did not start: {tail}")
    return json.loads(lines[0])


def run_sim(args, sim_args):
    start = time.monotonic()
    proc = subprocess.run([args.sim, *sim_args], capture_output=True, text=True,
                          timeout=args.timeout)
    return proc.returncode, proc.stdout + proc.stderr, time.monotonic() - start


def reproduce(args, sim_args):
    return " ".join(shlex.quote(a) for a in [args.sim, *sim_args])


def strategy_row(output, family, point):
    """{column: int} of the strategy campaign's row for family + point, or None."""
    columns = ["cases", "disc", "f32m", "correct", "ratio", "counter", "no-cex", "other",
               "mismatch", "direct ok", "direct n1"]
    for line in output.splitlines():
        fields = line.split()
        if fields[:2] == [family, point] and len(fields) == 2 + len(columns):
            return dict(zip(columns, map(int, fields[2:])))
    return None


def strategy_verdicts(args, command, family, point, restrict):
    """(encoders, direct, bug-or-None, seconds) at the configuration's own point."""
    sim_args = ["check", "--strategies", point, "--family", family, "--sut", command,
                "--seed", str(args.seed), "--cases", str(args.cases), *restrict,
                "--corpus-dir", str(args.corpus_dir)]
    code, output, seconds = run_sim(args, sim_args)
    row = strategy_row(output, family, point)
    if row is None:
        raise RuntimeError(f"check --strategies exited {code}: {_last(output)}")
    judged = row["cases"] - row["disc"] - row["f32m"]
    counts = (f"{row['correct']} correct, {row['ratio']} ratio, {row['counter']} "
              f"counterexamples of {judged}")
    if row["mismatch"]:
        first = next((m.strip() for m in output.splitlines() if m.strip().startswith(
            f"{family} {point}:")), "")
        encoders = f"NOT as predicted ({row['mismatch']} cases): {first}"
    else:
        encoders = f"{predicted(point, 'encoders')} (as predicted; {counts})"
    direct = (f"{predicted(point, 'direct')} (as predicted; {row['direct ok']} cases)"
              if row["direct ok"] and not row["mismatch"] else
              ("none" if not row["direct ok"] else "see encoders"))
    return encoders, direct, reproduce(args, sim_args), seconds


def full_batch_check(args, command, family, restrict):
    """A CLIP configuration judged at the full-batch gradient: None when it passes, else
    (first failing case, reproduce command)."""
    sim_args = ["check", "--strategies", FULL_BATCH_POINT, "--family", family, "--sut", command,
                "--seed", str(args.seed), "--cases", str(args.cases), *restrict,
                "--corpus-dir", str(args.corpus_dir)]
    code, output, seconds = run_sim(args, sim_args)
    if code == 0:
        return None, seconds
    first = next((m.strip() for m in output.splitlines()
                  if m.strip().startswith(f"{family} {FULL_BATCH_POINT}:")), _last(output))
    return (first.split(": ", 1)[-1], reproduce(args, sim_args)), seconds


def small_clip_case(seed, pairs):
    """A small CLIP case (W = P = 2, `pairs` pairs per shard, F = D = 2, normalised towers, one
    micro-step), its numbers drawn from `seed`: written by this command, not shrunk by the
    engine (the CLIP family has no shrinking campaign)."""
    import random
    rng = random.Random(f"{seed}/{pairs}")
    matrix = lambda rows: [[round(rng.gauss(0, 1), 6) for _ in range(2)] for _ in range(rows)]  # noqa: E731
    return {"format": "infonce-case/1", "family": "clip", "mesh": {"world": 2, "dp": 2},
            "reduction": "mean", "gather": "object", "compensate": True,
            "clip": {"image_tower": {"normalize": True, "weight": matrix(2)},
                     "text_tower": {"normalize": True, "weight": matrix(2)},
                     "log_logit_scale": 1.0, "logit_bias": None,
                     "batches": [[{"image": matrix(pairs), "text": matrix(pairs)}
                                  for _ in range(2)]]},
            "accumulation": {"steps": 1, "normalize": True}, "dtype": "float64"}


def small_case_failure(args, command):
    """(case file, replay command, what failed) for the first small CLIP case that `replay
    FILE --sut` fails, or None."""
    directory = pathlib.Path(args.corpus_dir)
    directory.mkdir(parents=True, exist_ok=True)
    for pairs in (1, 2):
        text = json.dumps(small_clip_case(args.seed, pairs), indent=1) + "\n"
        path = directory / f"clip-small-{hashlib.sha256(text.encode()).hexdigest()[:16]}.json"
        path.write_text(text, encoding="utf-8")
        sim_args = ["replay", str(path), "--sut", command]
        code, output, _ = run_sim(args, sim_args)
        what = next((line.strip() for line in output.splitlines()
                     if line.strip().startswith("gradient-matches-reference:")), "")
        error = re.search(r"gradient rel_err ([0-9.e+-]+)", what)
        # a gradient (or direct parameter) that differs; not only the reported loss (a local
        # loss reports each rank's own, which the strategy campaign does not judge either)
        if code == 1 and ((error and float(error.group(1)) > 1e-6) or
                          ("direct parameters" in what and "match" not in what)):
            return str(path), reproduce(args, sim_args), what
        path.unlink()
    return None


def property_check(args, command, restrict):
    """InfoNCE: the property campaign. (verdict, bug-or-None, seconds)."""
    sim_args = ["check", "--sut", command, "--seed", str(args.seed), "--cases", str(args.cases),
                "--corpus-dir", args.corpus_dir, *restrict]
    code, output, seconds = run_sim(args, sim_args)
    if code == 0:
        return "correct (every property held)", None, seconds
    if code != 1:
        raise RuntimeError(f"check --sut exited {code}: {_last(output)}")
    lines = output.splitlines()
    failed = next((i for i, line in enumerate(lines) if line.startswith("FAILED at case")), None)
    if failed is None:
        raise RuntimeError(f"check --sut exited 1 without a failure: {_last(output)}")
    field = {}
    for line in lines[failed + 1:]:
        key, _, value = line.strip().partition(":")
        if key in ("original", "shrunk", "saved", "reproduce", "or") and key not in field:
            field[key] = value.strip()
        elif key and "property" not in field and "shrunk" in field and key != "saved":
            field["property"] = line.strip()
    what = field.get("property", lines[failed])
    detail = f"{what} (shrunk: {field.get('shrunk', '?')})"
    commands = " ; or: ".join(f"`{c}`" for c in (field.get("reproduce"), field.get("or")) if c)
    return (f"fails: {what[:160]}", (field.get("saved", "(not saved)"), commands, detail),
            seconds)


def _last(text):
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(no output)"


# -- the table ---------------------------------------------------------------------------------


NOT_FIELD = {"conformance"}  # the SPEC's own torch reading, not a project of the field


def _version(distribution):
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def adapter_modules(names):
    """(kind, module or None, why) for every BUILT_IN adapter asked for: None when the module
    does not import (a module importing its package at the top, which is not installed)."""
    from .adapters import BUILT_IN
    for kind, module_name in BUILT_IN.items():
        if kind in NOT_FIELD or (names and kind not in names):
            continue
        try:
            yield kind, importlib.import_module(f".adapters.{module_name}", __package__), None
        except Exception as e:  # noqa: BLE001 - one row says why
            yield kind, None, f"{type(e).__name__}: {e}"


def configuration_rows(args, kind, module, why=None):
    package = getattr(module, "PACKAGE", kind)  # default: the adapter's name is the PyPI name
    installed = _version(package)
    project = f"{kind} ({package})" if package != kind else kind
    if module is None:
        yield [project, installed or "not installed", "", "" if installed is None else
               f"error: the adapter does not import: {why}", "", "", ""], []
        return
    configurations = [c for c in getattr(module, "CONFIGURATIONS", [{}])
                      if installed or c.get("_version")]
    reason = getattr(module, "NOT_EXPRESSIBLE", None)
    if installed is None and not configurations:
        yield [project, "not installed", "", "", "", "", ""], []
        return
    if reason:
        yield [project, installed, "(all)", "not run: " + reason, "", "", ""], []
        return
    for configuration in configurations:
        version = configuration.get("_version") or installed
        options = {k: v for k, v in configuration.items() if not k.startswith("_")}
        label = configuration.get("_label") or (
            ", ".join(f"{k}={v}" for k, v in options.items()) or "default")
        if args.match and args.match not in label:
            continue
        point = configuration.get("_point")
        runtime = configuration.get("_runtime", args.runtime)
        restrict = [a for r in configuration.get("_restrict", []) for a in ("--restrict", r)]
        if args.sut_timeout:
            restrict += ["--sut-timeout", args.sut_timeout]
        command = worker_command(args, kind, options, runtime)
        bugs, seconds = [], 0.0
        try:
            shake = handshake(command, args.timeout)
            families = shake["supports"].get("families", ["infonce"])
            family = ("clip" if "clip" in families else
                      "ntxent" if "ntxent" in families and "infonce" not in families
                      else "siglip" if "siglip" in families and "infonce" not in families
                      else "infonce")
            where = f"{label}" + (f"; `{point}`" if point else "") + f"; {runtime}"
            encoders, direct = "", ""
            if family in ("infonce", "ntxent", "siglip"):
                encoders, bug, s = property_check(args, command, restrict)
                seconds += s
                learnable = family == "siglip" or "learnable_temperature" in shake[
                    "supports"].get("extension_keys", [])  # SigLIP's log scale and bias
                direct = "in the campaign" if learnable else "none"
                if bug:
                    bugs.append(bug)
            if point:
                e, direct, _, s = strategy_verdicts(args, command, family, point, restrict)
                seconds += s
                encoders = e if family == "clip" else f"{encoders}; at its point: {e}"
            elif family == "clip":
                raise RuntimeError("a CLIP configuration needs `_point` (no campaign without it)")
            if family == "clip":
                bug, s = full_batch_check(args, command, family, restrict)
                seconds += s
                if bug:
                    small = small_case_failure(args, command)
                    commands = f"`{bug[1]}`" + (f" ; or: `{small[1]}`" if small else "")
                    detail = bug[0] + (f"; on the small case: {small[2]}" if small else "")
                    bugs.append((small[0] if small else None, commands, detail))
            status = "bug" if bugs else "correct"
        except Exception as e:  # noqa: BLE001 - one row says what went wrong
            where, encoders, direct, status = label, f"error: {e}", "", "error"
        yield [project, version, where, encoders, direct, status, f"{seconds:.0f} s"], bugs


def adapter_size(kind):
    """Issue 28's measure of a built-in adapter's module (infonce_sim.lines_of_code)."""
    from .adapters import BUILT_IN
    from .lines_of_code import count_file
    return count_file(pathlib.Path(__file__).parent / "adapters" / f"{BUILT_IN[kind]}.py")


def render_sizes(kinds, rows):
    """One row per adapter run: its lines of code, the installed version, and its
    configurations' verdicts (the full-batch column, counted; or why none ran)."""
    out = ["| adapter | installed | lines of code (+ field-table metadata) | verdicts |",
           "|---|---|---|---|"]
    for kind in kinds:
        mine = [row for row in rows if row[0].split(" (")[0] == kind]
        statuses = [row[5] for row in mine if row[5]]
        verdicts = (", ".join(f"{statuses.count(v)} {v}" for v in dict.fromkeys(statuses))
                    if statuses else (mine[0][3] or mine[0][1]) if mine else "none run")
        size = adapter_size(kind)
        out.append(f"| `{kind}` | {mine[0][1] if mine else ''} | {size.code} (+{size.metadata}) "
                   f"| {verdicts.replace('|', chr(92) + '|')} |")
    return out


def render(rows, bug_lists, args, seconds, kinds=()):
    head = ["project", "installed", "configuration; point; runtime", "encoders", "direct parameters",
            "full-batch", "time"]
    out = [f"Field table: `python -m infonce_sim.field --cases {args.cases} --seed {args.seed}` "
           f"({time.strftime('%Y-%m-%d')}, {seconds:.0f} s; infonce-sim {args.sim})", "",
           "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        out.append("| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |")
    out.append("")
    found = [(row, bug) for row, bugs in zip(rows, bug_lists) for bug in bugs]
    out.append(f"Bugs found: {len(found)}" + (":" if found else "."))
    for row, (case_file, command, detail) in found:
        out.append(f"- {row[0]}, {row[2]}: {detail}")
        clip = case_file and pathlib.Path(case_file).name.startswith("clip-small-")
        out.append("  - shrunk case: none (no shrinking campaign for CLIP); small case "
                   f"(W = P = 2, written by this command): `{case_file}`" if clip else
                   f"  - shrunk case: `{case_file}`" if case_file else
                   "  - shrunk case: none (no shrinking campaign for CLIP; the command names "
                   "the first failing case)")
        out.append(f"  - reproduce: {command}")
    if kinds:
        out += ["", "Adapters (lines of code: python/infonce_sim/lines_of_code.py's rule; issue 28's "
                "target: at most 30, tests/python/test_adapter_size.py):", "",
                *render_sizes(kinds, rows)]
    return "\n".join(out) + "\n"


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if not pathlib.Path(args.sim).is_file():
        print(f"infonce_sim.field: no infonce-sim binary at {args.sim} (--sim PATH)",
              file=sys.stderr)
        return 2
    # Every check writes its shrunk cases there (check --strategies too), never into corpus/.
    pathlib.Path(args.corpus_dir).mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    rows, bug_lists, kinds = [], [], []
    for kind, module, why in adapter_modules(args.adapter):
        kinds.append(kind)
        for row, bugs in configuration_rows(args, kind, module, why):
            print(f"field: {' | '.join(row[:3])}: {row[5]} ({row[6]})", file=sys.stderr)
            rows.append(row)
            bug_lists.append(bugs)
    table = render(rows, bug_lists, args, time.monotonic() - start, kinds)
    sys.stdout.write(table)
    if args.out:
        pathlib.Path(args.out).write_text(table, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
