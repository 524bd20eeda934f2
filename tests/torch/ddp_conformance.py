#!/usr/bin/env python3
"""PyTorch DDP conformance driver for infonce-sim.

An independent implementation, in torch, of the data-parallel InfoNCE step of
SPEC.md (sections 2-4, 7, 8): for every `infonce-case/1` file it

  * runs the step for real: W processes (torch.multiprocessing, spawn), gloo on
    127.0.0.1, DistributedDataParallel around a bias-free nn.Linear(F, D)
    (+ F.normalize), DP groups from dist.new_group (world rank w -> DP shard
    d = w // R, replica r = w % R, DP group {r, r+R, ...}), the gather over the
    DP group (object or tensor path), own slot at the DP rank, compensation,
    gradient accumulation with no_sync;
  * computes the full-batch single-process reference (autograd, float64);
  * compares with the case's `expect`, with `--ref-dir` reference files and,
    with `--infonce-sim PATH`, with `PATH run --case FILE --json`.

The torch code is the infonce_sim package's (python/infonce_sim: spec.py, the
`conformance` adapter, the DDP and in-process runtimes); this file is the driver
that judges case files with it.

Usage: ddp_conformance.py [--runtime ddp|inprocess] [--infonce-sim PATH] [--rtol 1e-10]
       CASE_OR_DIR...
Exit: 0 all pass, 1 some failed, 2 bad input, 77 torch not importable (or
every case skipped).

Hard-negative padding: the trainer pads with numpy's generator and the C++
harness with its own; this driver reproduces neither generator. When a case
needs padding it must record `padding_draws` (`infonce-sim export` records them
for generated cases); a case that needs padding without them is skipped with a
message saying so.

Tolerances (SPEC section 6): float64 |got - want| <= 1e-12 + 1e-10 * max|want|.
float32 (key "dtype"): torch and infonce-sim round differently (summation
order), and rounding errors scale with the summands, not with a possibly
cancelled sum, so the scale is condition-aware: 1e-6 + 1e-5 * max(max|want|,
S), with S for gradients infonce-sim's `error_scale` (max over entries of the
sum of |terms| of its reference gradient) and for losses max ||e||^2 / T (the
largest logit). The batched/loop cross-check of the float64 reference uses
1e-14 + 1e-12 * max(max|want|, S). Reported errors are |got - want| divided by
max(scale, atol / rtol): below rtol means within tolerance.
"""

import argparse
import dataclasses
import json
import math
import os
import pathlib
import subprocess
import sys
import time

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_SKIPPED = 0, 1, 2, 77

# The torch implementation lives in the infonce_sim package (python/): one SPEC
# reading, run here under real DDP (or, with --runtime inprocess, on the in-process
# runtime), and as the `conformance` adapter of the infonce-sut/1 worker.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "python"))

from infonce_sim.cases.case import CaseError, NeedsPaddingDraws  # noqa: E402
from infonce_sim.cases.case_families import load_case  # noqa: E402

try:
    import torch

    from infonce_sim.adapters.conformance import ConformanceAdapter
    from infonce_sim.runtime.ddp import DdpRuntime, PoolError
    from infonce_sim.runtime.inprocess_runtime import InProcessRuntime
    from infonce_sim.runtime.inprocess import RuntimeError_ as InProcessError
    from infonce_sim.cases.spec import (batched_path_applies, check_padding_streams,
                                  compensation_scale, expected_ratio, reference)
except Exception:  # any import failure means "no usable torch here"
    torch = None


def run_step(runtime, case):
    """Rank 0's reported loss, every rank's loss, the reduced gradient (or an error)."""
    try:
        result = runtime.run(ConformanceAdapter(), case)
    except (PoolError, InProcessError, CaseError, NeedsPaddingDraws) as e:
        return {"error": str(e)}
    grads = result["grads"]
    if any(not torch.equal(g, grads[0]) for g in grads):
        return {"error": "ranks hold different gradients after the DDP reduction"}
    return {
        "loss": result["losses"][0],
        "losses": result["losses"],
        "grad": result["grad"].to(torch.float64),
    }


# --------------------------------------------------------------------------
# Comparison
# --------------------------------------------------------------------------


def _none_to_nan(value):
    if isinstance(value, list):
        return [_none_to_nan(v) for v in value]
    return math.nan if value is None else value


def _as_tensor(value):
    if isinstance(value, torch.Tensor):
        return value.detach().to(torch.float64)
    return torch.tensor(_none_to_nan(value), dtype=torch.float64)


def scalar_error(got, want):
    """(relative error, absolute error); non-finite values must match exactly.

    None (JSON null: nlohmann-json writes +-inf and NaN as null) matches any non-finite value.
    """
    if got is None:
        return (0.0, 0.0) if not math.isfinite(want) else (math.inf, math.inf)
    if not (math.isfinite(got) and math.isfinite(want)):
        return (0.0, 0.0) if got == want else (math.inf, math.inf)
    diff = abs(got - want)
    return diff / abs(want) if want else diff, diff


def array_error(got, want):
    """(max|got-want| / max|want|, max|got-want|), SPEC section 6."""
    got, want = _as_tensor(got), _as_tensor(want)
    if got.shape != want.shape or not bool(torch.isfinite(got).all() & torch.isfinite(want).all()):
        same = got.shape == want.shape and bool(torch.equal(got, want))
        return (0.0, 0.0) if same else (math.inf, math.inf)
    diff = float((got - want).abs().max()) if got.numel() else 0.0
    scale = float(want.abs().max()) if want.numel() else 0.0
    return diff / scale if scale else diff, diff


class Verdict:
    """Every comparison of one case; errors are relative to the scale each check used."""

    def __init__(self):
        self.failures = []
        self.loss_error = 0.0
        self.grad_error = 0.0
        self.worst = {}  # (source, "loss" | "grad") -> worst relative error

    @property
    def sources(self):
        return list(dict.fromkeys(source for source, _ in self.worst))

    def check(self, source, what, error, scale, rtol, atol):
        """|got - want| <= atol + rtol * scale.

        The recorded error is |got - want| / max(scale, atol / rtol): below rtol
        means within tolerance, and an exactly-zero quantity computed as
        rounding noise (passing on atol) does not show up as a huge error.
        """
        rel, diff = error
        if math.isfinite(diff):  # comparable with rtol: below it <=> within tolerance (x2)
            floor = max(scale, atol / rtol if rtol > 0 else 0.0)
            rel = diff / floor if floor > 0 else diff
        if what == "grad":
            self.grad_error = max(self.grad_error, rel)
        else:
            self.loss_error = max(self.loss_error, rel)
        self.worst[(source, what)] = max(self.worst.get((source, what), 0.0), rel)
        if not diff <= atol + rtol * scale:
            self.failures.append(f"{source} {what} rel err {rel:.3g}")

    def loss(self, source, got, want, rtol, atol, summand_scale=0.0):
        magnitude = abs(want) if want is not None and math.isfinite(want) else 0.0
        self.check(source, "loss", scalar_error(got, want), max(magnitude, summand_scale), rtol,
                   atol)

    def losses(self, source, got, want, rtol, atol, summand_scale=0.0):
        for g, w in zip(got, want):
            self.loss(source, g, w, rtol, atol, summand_scale)
        if len(got) != len(want):
            self.failures.append(f"{source}: {len(got)} rank losses, expected {len(want)}")

    def grad(self, source, got, want, rtol, atol, summand_scale=0.0):
        want_t = _as_tensor(want)
        magnitude = float(want_t.abs().max()) if want_t.numel() and bool(
            torch.isfinite(want_t).all()) else 0.0
        self.check(source, "grad", array_error(got, want), max(magnitude, summand_scale), rtol,
                   atol)


def start_infonce_sim(binary, path):
    """`binary run --case path --json`, started now (it runs while torch does)."""
    try:
        return subprocess.Popen([binary, "run", "--case", str(path), "--json"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True), None
    except OSError as e:
        return None, f"infonce-sim: {e}"


def finish_infonce_sim(started, timeout):
    """(result JSON, None) or (None, error).

    Exit 1 is `run`'s verdict on its own check (compensate: false differs from
    the reference, legacy padding drew a positive): the result is still the
    step's, and what this driver compares. Any other non-zero exit is an error.
    """
    process, error = started
    if error:
        return None, error
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        return None, f"infonce-sim: timed out after {timeout} s"
    if process.returncode not in (0, 1):
        last = (err.strip().splitlines() or ["(no message)"])[-1]
        return None, f"infonce-sim exited {process.returncode}: {last}"
    try:
        return json.loads(out), None
    except ValueError as e:
        return None, f"infonce-sim exited {process.returncode} and printed no JSON: {e}"


# --------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------


def case_files(arguments):
    files = []
    for arg in arguments:
        path = pathlib.Path(arg)
        if path.is_dir():
            files.extend(sorted(path.glob("*.json")))
        elif path.is_file():
            files.append(path)
        else:
            raise CaseError(f"{arg}: no such file or directory")
    return files


def reference_file(ref_dir, path):
    """ref/NAME.json belongs to NAME-fixed.json (and, compensation-free, NAME-prefix.json)."""
    stem = path.stem
    for suffix in ("-fixed", "-prefix"):
        if stem.endswith(suffix):
            candidate = pathlib.Path(ref_dir) / (stem[:-len(suffix)] + ".json")
            return candidate if candidate.is_file() else None
    return None


def tolerances(args, case, source):
    float32 = case.dtype == "float32"
    rtol = args.rtol if args.rtol is not None else (1e-5 if float32 else 1e-10)
    atol = args.atol if args.atol is not None else (1e-6 if float32 else 1e-12)
    if source == "expect" and case.expect and args.rtol is None:
        rtol = case.expect.get("rtol", rtol)
    if source == "expect" and case.expect and args.atol is None:
        atol = case.expect.get("atol", atol)
    if float32:  # float32 rounding differs between implementations at ~1e-7 (SPEC section 6)
        rtol = rtol if args.rtol is not None else max(rtol, 1e-5)
        atol = atol if args.atol is not None else max(atol, 1e-6)
    return rtol, atol


# Batched and loop paths of the float64 reference: only summation order differs (SPEC 6).
PATH_TOLERANCE = (1e-12, 1e-14)


def summand_scales(case, ref, sim, always=False):
    """(loss scale, grad scale) of the condition-aware float32 comparison, or (0, 0).

    float32 implementations differ in summation order, and a rounding error is
    bounded by the size of the summands, not by their (possibly cancelled or
    tiny) sum. Gradient: infonce-sim's `error_scale` = max(max|G_ref|, max over
    entries of the sum of |terms|) of its reference. Loss: max ||e||^2 / T, the
    largest possible logit (a loss is a mean of log-sum-exp minus a logit).
    float64 keeps the strict bar, relative to max|want| (rtol 1e-10), unless
    `always` (the float64 path cross-check of a degenerate case, e.g. D = 1
    with normalisation, whose exact gradient is 0 and computed one is noise).
    """
    if case.dtype != "float32" and not always:
        return 0.0, 0.0
    out = sim[0] if sim else None
    grad_scale = float(out.get("error_scale") or 0.0) if out else 0.0
    return ref["logit_scale"], grad_scale


def judge(args, path, case, ref, ddp, sim):
    """Every comparison of one case."""
    verdict = Verdict()
    tol = lambda source: tolerances(args, case, source)
    loss_scale, grad_scale = summand_scales(case, ref, sim)
    if ref["loop"] is not None:  # the trainer's two code paths, both float64 here
        _, sim_grad_scale = summand_scales(case, ref, sim, always=True)
        verdict.loss("paths", ref["loop"]["loss"], ref["loss"], *PATH_TOLERANCE,
                     ref["logit_scale"])
        verdict.grad("paths", ref["loop"]["grad"], ref["grad"], *PATH_TOLERANCE, sim_grad_scale)
    if case.expect is not None:
        verdict.loss("expect", ddp["loss"], case.expect["loss"], *tol("expect"))
        verdict.grad("expect", ddp["grad"], case.expect["grad"], *tol("expect"))
    ratio = expected_ratio(case)
    if ratio is not None:  # the DDP step against the own reference
        want = [ref["shard_losses"][w // case.replicas] for w in range(case.world)]
        verdict.losses("self", ddp["losses"], want, *tol("self"), loss_scale)
        verdict.grad("self", ddp["grad"], ref["grad"] * ratio, *tol("self"), grad_scale * ratio)
    if args.ref_dir:
        ref_path = reference_file(args.ref_dir, path)
        if ref_path is not None:
            with open(ref_path, encoding="utf-8") as f:
                stored = json.load(f)
            verdict.loss("ref-dir", ref["loss"], stored["ref_loss"], *tol("ref-dir"))
            verdict.grad("ref-dir", ref["grad"], stored["ref_grad"], *tol("ref-dir"))
    if args.infonce_sim:
        out, error = sim
        if error:
            verdict.failures.append(error)
        else:
            verdict.loss("sim", out.get("loss"), ddp["loss"], *tol("sim"), loss_scale)
            verdict.grad("sim", out.get("grad"), ddp["grad"], *tol("sim"),
                         grad_scale * (ratio if ratio is not None else 1.0))
            if "losses" in out:
                verdict.losses("sim", out["losses"], ddp["losses"], *tol("sim"), loss_scale)
            sim_ref = out.get("reference", {})
            verdict.loss("sim-ref", sim_ref.get("loss"), ref["loss"], *tol("sim"), loss_scale)
            verdict.grad("sim-ref", sim_ref.get("grad"), ref["grad"], *tol("sim"), grad_scale)
    return verdict


def measured_ratio(grad, ref_grad):
    denominator = float((ref_grad * ref_grad).sum())
    return float((grad * ref_grad).sum()) / denominator if denominator else math.nan


# How far an exact tie with the fake-negative threshold may round: the SPEC sums every
# deciding dot product in index order (loss/ordered_dot.hpp); torch's matmul does not, so
# at a tie that the generator builds on purpose (threshold-ties features, margin 0) one
# last bit can flip the torch reference's mask decision (generated case 86 on torch 2.13:
# an entry of probability ~1e-10 masked on one side only). 1e-12 of the largest logit
# is ~100 ulps.
MASK_TIE_MARGIN = 1e-12


def judge_at_a_mask_tie(args, path, case, ref, ddp, sim, verdict):
    """A failing case with a fake-negative mask, judged again against the torch reference
    with the threshold moved by MASK_TIE_MARGIN x the largest logit either way: a tie
    that rounding decides either way passes with either decision; anything else fails."""
    if not case.loss.mask_fake_negative or case.dtype == "float32":
        return verdict
    nudge = MASK_TIE_MARGIN * max(1.0, ref["logit_scale"] * case.loss.temperature)
    for sign in (1.0, -1.0):
        nudged = dataclasses.replace(
            case, loss=dataclasses.replace(case.loss,
                                           fake_neg_margin=case.loss.fake_neg_margin + sign * nudge))
        try:
            retry = judge(args, path, nudged, prepare(nudged), ddp, sim)
        except Exception:  # noqa: BLE001 - the nudged case is no case: keep the first verdict
            continue
        if not retry.failures:
            retry.failures = []
            retry.tie = f"mask tie: passes with the threshold moved by {sign * nudge:+.1e}"
            return retry
    return verdict


def prepare(case):
    """Reference, path cross-check and padding validation in the parent (may raise)."""
    check_padding_streams(case)
    ref = reference(case)
    ref["loop"] = reference(case, path="loop") if batched_path_applies(case) else None
    return ref


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cases", nargs="+", metavar="CASE_OR_DIR")
    parser.add_argument("--infonce-sim", metavar="PATH", help="also compare with PATH run --case")
    parser.add_argument("--rtol", type=float, default=None,
                        help="relative tolerance (default 1e-10; the case's expect.rtol "
                        "for its expect)")
    parser.add_argument("--atol", type=float, default=None, help="absolute tolerance (1e-12)")
    parser.add_argument("--ref-dir", metavar="DIR",
                        help="compare the reference with DIR/NAME.json (ref_loss, ref_grad)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per case")
    parser.add_argument("--json-out", metavar="FILE", help="write one JSON line per case")
    parser.add_argument("--runtime", choices=("ddp", "inprocess"), default="ddp",
                        help="real DDP (default) or the in-process runtime of infonce_sim")
    args = parser.parse_args(argv)  # exits 2 on bad usage

    if torch is None:
        print(f"SKIPPED: torch not importable by {sys.executable} (scripts/python-env.sh "
              "makes a venv with it: .venv/bin/python)")
        return EXIT_SKIPPED
    torch.set_num_threads(1)
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    try:
        files = case_files(args.cases)
    except CaseError as e:
        print(f"error: {e}")
        return EXIT_BAD_INPUT
    if not files:
        print("error: no case files")
        return EXIT_BAD_INPUT

    counts = {"passed": 0, "failed": 0, "skipped": 0, "bad input": 0}
    worst = {}  # (dtype, source, "loss" | "grad") -> worst relative error over all cases
    torch_seconds, torch_cases = 0.0, 0
    if args.runtime == "ddp":
        runtime = DdpRuntime({"kind": "conformance"}, timeout=args.timeout)
    else:
        runtime = InProcessRuntime()
    json_out = open(args.json_out, "w", encoding="utf-8") if args.json_out else None
    try:
        for case_id, path in enumerate(files):
            name = path.stem
            try:
                case = load_case(path)
                mesh = f"{case.world}/{case.dp}"
                ref = prepare(case)
            except CaseError as e:
                print(f"BAD   {name}: {e}", flush=True)
                counts["bad input"] += 1
                continue
            except NeedsPaddingDraws as e:
                print(f"SKIP  {name} W/P {mesh}: {e}", flush=True)
                counts["skipped"] += 1
                continue
            started = start_infonce_sim(args.infonce_sim, path) if args.infonce_sim else None
            start = time.monotonic()
            ddp = run_step(runtime, case)
            torch_seconds += time.monotonic() - start
            torch_cases += 1
            sim = finish_infonce_sim(started, args.timeout) if started else None
            if "error" in ddp:
                print(f"FAIL  {name} W/P {mesh}: torch DDP: {ddp['error']}", flush=True)
                counts["failed"] += 1
                continue
            verdict = judge(args, path, case, ref, ddp, sim)
            if verdict.failures:
                verdict = judge_at_a_mask_tie(args, path, case, ref, ddp, sim, verdict)
            ok = not verdict.failures
            counts["passed" if ok else "failed"] += 1
            for (source, what), rel in verdict.worst.items():
                key = (case.dtype, source, what)
                worst[key] = max(worst.get(key, 0.0), rel)
            ratio = measured_ratio(ddp["grad"], ref["grad"])
            print(f"{'PASS' if ok else 'FAIL'}  {name} W/P {mesh}  worst rel err loss "
                  f"{verdict.loss_error:.2e} grad {verdict.grad_error:.2e}  ratio {ratio:.6f}  "
                  f"[vs {','.join(verdict.sources) or 'nothing'}]" +
                  ("" if ok else "  " + "; ".join(verdict.failures)) +
                  (f"  ({verdict.tie})" if getattr(verdict, "tie", None) else ""), flush=True)
            if json_out:
                json_out.write(json.dumps({
                    "case": str(path), "pass": ok, "loss": ddp["loss"], "losses": ddp["losses"],
                    "grad": ddp["grad"].tolist(), "ratio": ratio,
                    "reference": {"loss": ref["loss"], "grad": ref["grad"].tolist(),
                                  "shard_losses": ref["shard_losses"]},
                    "failures": verdict.failures}) + "\n")
    finally:
        runtime.close()
        if json_out:
            json_out.close()

    print(f"{counts['passed']} passed, {counts['failed']} failed" +
          "".join(f", {counts[k]} {k}" for k in ("skipped", "bad input") if counts[k]))
    for dtype, source in dict.fromkeys((dtype, source) for dtype, source, _ in sorted(worst)):
        scale = " (relative to the summand scale)" if dtype == "float32" and args.infonce_sim \
            and args.rtol is None else ""
        print(f"{dtype} worst rel err vs {source}: loss "
              f"{worst.get((dtype, source, 'loss'), 0.0):.2e}, grad "
              f"{worst.get((dtype, source, 'grad'), 0.0):.2e}{scale}")
    if torch_cases:
        spawn = getattr(runtime, "spawn_seconds", 0.0)
        print(f"torch {runtime.name}: {torch_cases} cases in {torch_seconds:.2f} s = "
              f"{torch_cases / torch_seconds:.2f} cases/s (including {spawn:.2f} s "
              f"spawning rank pools)")
    if counts["bad input"]:
        return EXIT_BAD_INPUT
    if counts["failed"]:
        return EXIT_FAILED
    if not counts["passed"]:
        return EXIT_SKIPPED
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
