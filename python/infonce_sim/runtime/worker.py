"""The `infonce-sut/1` worker: a system under test for `infonce-sim check --sut CMD`.

    python3 -m infonce_sim.worker --adapter conformance|ms-swift|open-clip|MODULE:FUNCTION
        [--runtime inprocess|ddp] [--swift-root DIR] [--swift-file F] [--open-clip-root DIR]
        [--max-world N] [--max-replicas N] [--option KEY=VALUE ...]

Protocol (docs/sut-protocol.md): newline-delimited JSON on stdin/stdout. The worker
sends the handshake, then answers each request {"id", "case"} with one response
{"id", "losses", "grad", "grads", "padding_draws"}, {"id", "error"}, or {"id", "declined"}
(the adapter raised infonce_sim.Declined, or its `decline(case)` returned a reason); it exits 0
when stdin closes. Everything else anyone prints (the trainer included) goes to
stderr: file descriptor 1 is pointed at stderr, the protocol has its own copy.

Exit: 0 at end of input, 2 on bad options or an adapter that cannot be loaded (one
line on stderr, before any handshake).
"""

import argparse
import gc
import json
import math
import os
import sys

from ..cases.case import CaseError
from ..cases.case_families import parse_case
from .protocol import PROTOCOL, Declined


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python3 -m infonce_sim.worker",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--adapter", required=True,
                        help="conformance, ms-swift, open-clip, or MODULE:FUNCTION (a factory "
                        "returning an "
                        "adapter, see python/README.md)")
    parser.add_argument("--runtime", choices=("inprocess", "ddp"), default="inprocess")
    parser.add_argument("--swift-root", metavar="DIR",
                        help="ms-swift checkout (DIR/swift/loss/...); default: the installed "
                        "swift package")
    parser.add_argument("--swift-file", metavar="F", default="embedding.py",
                        help="the loss file under swift/loss/ (default embedding.py)")
    parser.add_argument("--open-clip-root", metavar="DIR",
                        help="open-clip, open-clip-siglip: an open_clip checkout (DIR/src/open_clip/loss.py); "
                        "default: the installed open_clip package")
    parser.add_argument("--max-world", type=int, default=8, metavar="N")
    parser.add_argument("--max-replicas", type=int, default=None, metavar="N",
                        help="largest replicas per DP shard (default: 8 conformance, 2 ms-swift)")
    parser.add_argument("--max-pools", type=int, default=4, metavar="N",
                        help="ddp: world sizes whose rank processes are kept alive (default 4)")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="passed to a MODULE:FUNCTION factory as a keyword argument")
    args = parser.parse_args(argv)
    if args.max_world < 1 or (args.max_replicas is not None and args.max_replicas < 1):
        parser.error("--max-world and --max-replicas must be >= 1")
    return args


def adapter_spec(args):
    spec = {"kind": args.adapter, "max_world": args.max_world}
    if args.max_replicas is not None:
        spec["max_replicas"] = args.max_replicas
    if args.adapter == "ms-swift":
        spec.update(swift_root=args.swift_root, swift_file=args.swift_file)
    if args.adapter in ("open-clip", "open-clip-siglip") and args.open_clip_root:
        spec.update(open_clip_root=args.open_clip_root)
    for option in args.option:
        key, sep, value = option.partition("=")
        if not sep or not key:
            raise ValueError(f"--option {option}: expected KEY=VALUE")
        spec[key] = value
    return spec


def _with_empty_tail(draws, case):
    """[micro][world rank] draws for every micro-step of the case file: the
    micro-steps after a partial accumulation window drew nothing."""
    if draws is None:
        return None
    return list(draws) + [[[] for _ in range(case.world)] for _ in range(case.empty_tail_steps)]


def _finite_or_none(x):
    return x if math.isfinite(x) else None


def _matrix(t):
    """The rows of `t` as float64 numbers, None where not finite (JSON has no inf or nan).

    Checked in Python on the list, no torch op: a finite sum has no inf or nan term; a sum
    that is not finite (or overflowed) goes element by element, which gives the same list
    when every element is finite after all."""
    import torch
    rows = t.detach().to(torch.float64).tolist()
    if math.isfinite(sum(map(sum, rows))):
        return rows
    return [[_finite_or_none(x) for x in row] for row in rows]


def one_line(text):
    return " ".join(str(text).split())[:2000] or "(no message)"


def outside_supports(case, supports):
    """Why the case is outside the handshake's `supports`, or None."""
    if case.family == "clip":
        return _clip_outside_supports(case, supports)
    if case.family == "ntxent":
        return _ntxent_outside_supports(case, supports)
    if case.family == "siglip":
        return _siglip_outside_supports(case, supports)
    checks = [
        (case.loss.use_batch in supports.get("use_batch", [True]), "use_batch"),
        (case.loss.hard_negatives is None or supports.get("hard_negatives", False),
         "hard_negatives"),
        (case.loss.hard_negatives is None or case.loss.padding in supports.get("padding", ["legacy"]),
         "padding"),
        (not case.loss.mask_fake_negative or supports.get("mask_fake_negative", False),
         "mask_fake_negative"),
        (not case.loss.include_qq or supports.get("include_qq", False), "include_qq"),
        (not case.loss.include_dd or supports.get("include_dd", False), "include_dd"),
        *_step_checks(case, supports),
        (case.rng_mode in supports.get("rng_modes", ["synced"]), "rng.mode"),
    ]
    return _first_outside(checks)


def _step_checks(case, supports):
    """The (ok, key) checks of the axes every loss family's case has."""
    return [
        (case.reduction in supports.get("reductions", ["mean"]), "reduction"),
        (case.gather in supports.get("gathers", ["object"]), "gather"),
        (case.dtype in supports.get("dtypes", ["float64"]), "dtype"),
        (case.world <= supports.get("max_world", 1), "mesh.world"),
        (case.replicas <= supports.get("max_replicas", 1), "mesh (replicas)"),
        (case.compensate or supports.get("compensate_false", False), "compensate"),
        (case.ga_normalize in supports.get("accumulation_normalize", [True]),
         "accumulation.normalize"),
    ]


def _first_outside(checks):
    for ok, key in checks:
        if not ok:
            return f"{key}: outside what this SUT declared in its handshake"
    return None


def _clip_outside_supports(case, supports):
    checks = [
        ("clip" in supports.get("families", ["infonce"]), "family"),
        (case.logit_bias is None or supports.get("logit_bias", False), "clip.logit_bias"),
        *_step_checks(case, supports),
    ]
    return _first_outside(checks)


def _ntxent_outside_supports(case, supports):
    checks = [
        ("ntxent" in supports.get("families", ["infonce"]), "family"),
        (not case.learnable_temperature
         or "learnable_temperature" in supports.get("extension_keys", []),
         "learnable_temperature"),
        (supports.get("unequal_batches", True) or _equal_batches(case), "unequal batches"),
        *_step_checks(case, supports),
    ]
    return _first_outside(checks)


def _equal_batches(case):
    """Whether every DP shard of each micro-step holds the same number of samples or pairs
    (an NT-Xent or SigLIP case: batches[micro][dp shard] = (rows, rows))."""
    return all(len({len(rows) for rows, _ in micro}) == 1 for micro in case.batches)


def _siglip_outside_supports(case, supports):
    checks = [
        ("siglip" in supports.get("families", ["infonce"]), "family"),
        (supports.get("unequal_batches", True) or _equal_batches(case), "unequal batches"),
        *_step_checks(case, supports),
    ]
    return _first_outside(checks)


# json.dumps(x, allow_nan=False) is _STRICT_JSON.encode(x): one encoder, not one per call.
_STRICT_JSON = json.JSONEncoder(allow_nan=False)

# Case keys beyond SPEC section 7 that a request may carry only when the SUT declared them.
EXTENSION_KEYS = ("dtype", "strategy", "learnable_temperature", "family")


class Worker:
    def __init__(self, adapter, runtime, out):
        self.adapter = adapter
        self.runtime = runtime
        self.out = out
        self.supports = adapter.supports
        self.extension_keys = set(self.supports.get("extension_keys", []))

    def handshake(self):
        self.send({"protocol": PROTOCOL, "name": f"{self.adapter.name} on the {self.runtime.name} "
                   "runtime", "supports": self.supports})

    def send(self, message):
        self.out.write(json.dumps(message, allow_nan=False) + "\n")
        self.out.flush()

    def answer(self, line):
        request_id = None
        try:
            request = json.loads(line)
            if not isinstance(request, dict):
                raise CaseError("request: expected a JSON object")
            request_id = request.get("id")
            unknown = sorted(set(request) - {"id", "case"})
            if unknown:
                raise CaseError(f"request.{unknown[0]}: unknown key")
            if isinstance(request_id, bool) or not isinstance(request_id, int):
                raise CaseError("request.id: expected an integer")
            if "case" not in request:
                raise CaseError("request.case: missing")
            case_obj = request["case"]
            for key in EXTENSION_KEYS:
                if isinstance(case_obj, dict) and key in case_obj and \
                        key not in self.extension_keys:
                    raise CaseError(f"case.{key}: not declared in extension_keys")
            case = parse_case(case_obj)
            why = outside_supports(case, self.supports)
            if why:
                raise CaseError(why)
            reason = getattr(self.adapter, "decline", lambda _case: None)(case)
            if reason:
                raise Declined(reason)
            # The case as the trainer runs it (e.g. a strategy point baked into its code).
            case = getattr(self.adapter, "prepare", lambda same: same)(case)
            result = self.runtime.run(self.adapter, case,
                                      self.supports.get("replays_padding_draws", False))
            matrices = {}  # id(tensor) -> its JSON: ranks of one reduction share a tensor
            for g in [result["grad"], *result["grads"]]:
                if id(g) not in matrices:
                    matrices[id(g)] = _STRICT_JSON.encode(_matrix(g))
            # json.dumps of {id, losses, grad, grads, padding_draws, direct}, each matrix
            # encoded once; CLIP has no padding_draws, only issue 13's cases have direct
            parts = [
                '{"id": ', json.dumps(request_id),
                ', "losses": ', _STRICT_JSON.encode(
                    [_finite_or_none(float(x)) for x in result["losses"]]),
                ', "grad": ', matrices[id(result["grad"])],
                ', "grads": [', ", ".join(matrices[id(g)] for g in result["grads"]), "]"]
            if result.get("padding_draws") is not None:
                parts += [', "padding_draws": ',
                          json.dumps(_with_empty_tail(result["padding_draws"], case))]
            if result.get("direct") is not None:
                parts += [', "direct": ', _STRICT_JSON.encode(
                    {k: _finite_or_none(float(v)) for k, v in result["direct"].items()})]
            text = "".join(parts + ["}"])
        except Declined as e:
            text = json.dumps({"id": request_id, "declined": one_line(e)})
        except ValueError as e:  # json.JSONDecodeError included
            text = json.dumps({"id": request_id, "error": one_line(f"{type(e).__name__}: {e}")})
        except Exception as e:  # noqa: BLE001 - any failure of the step is the response
            message = str(e) if isinstance(e, CaseError) else f"{type(e).__name__}: {e}"
            text = json.dumps({"id": request_id, "error": one_line(message)})
        self.out.write(text + "\n")
        self.out.flush()

    def serve(self, stream):
        for line in stream:
            if line.strip():
                self.answer(line)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    # The protocol keeps its own copy of stdout; fd 1 (print, C code) now goes to stderr.
    out = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        import torch
    except Exception as e:  # noqa: BLE001
        print(f"infonce_sim.worker: torch not importable by {sys.executable}: {e}",
              file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    # (torch-dependent modules: imported once torch is known to import)
    from .adapter_spec import load_adapter
    try:
        spec = adapter_spec(args)
        adapter = load_adapter(spec)
    except Exception as e:  # noqa: BLE001 - bad options or an adapter that cannot load
        print(f"infonce_sim.worker: {one_line(e)}", file=sys.stderr)
        return 2
    if args.runtime == "ddp":
        from .ddp import DdpRuntime
        runtime = DdpRuntime(spec, max_pools=args.max_pools)
    else:
        from .inprocess_runtime import InProcessRuntime
        runtime = InProcessRuntime()
    worker = Worker(adapter, runtime, out)
    # What is loaded now (torch's ~170,000 objects) lives as long as the process: kept out
    # of the collector's full passes, which would walk all of it again (~80 ms each).
    gc.freeze()
    try:
        worker.handshake()
        worker.serve(sys.stdin)
    except BrokenPipeError:
        pass
    finally:
        runtime.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
