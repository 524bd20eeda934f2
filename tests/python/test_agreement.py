"""The in-process runtime against real DDP (gloo, one process per rank) on the same cases:
every rank's loss, every rank's reduced gradient and the padding draws agree within 1e-12
in float64 (1e-5 relative in float32)."""

import json
import math
import os

import torch

from conftest import export_cases, run_on_both
from infonce_sim.adapters import load_adapter
from infonce_sim.cases.case_families import parse_case
from infonce_sim.runtime.ddp import DdpRuntime
from infonce_sim.runtime.inprocess_runtime import InProcessRuntime
from infonce_sim.runtime.worker import outside_supports

CASES = int(os.environ.get("INFONCE_AGREEMENT_CASES", "150"))


def _worst(a, b):
    """(worst gradient error relative to max(max|grad|, 1), worst loss error), or None."""
    worst_grad = 0.0
    for ga, gb in zip(a["grads"], b["grads"]):
        ga, gb = ga.double(), gb.double()
        if not (bool(torch.isfinite(ga).all()) and bool(torch.isfinite(gb).all())):
            if not torch.equal(torch.isnan(ga), torch.isnan(gb)):
                return None
            continue
        worst_grad = max(worst_grad, float((ga - gb).abs().max()) / max(
            float(gb.abs().max()), 1.0))
    worst_loss = 0.0
    for la, lb in zip(a["losses"], b["losses"]):
        if not (math.isfinite(la) and math.isfinite(lb)):
            if not ((math.isnan(la) and math.isnan(lb)) or la == lb):
                return None
            continue
        worst_loss = max(worst_loss, abs(la - lb) / max(abs(lb), 1.0))
    return worst_grad, worst_loss


def _run_all(spec, cases):
    adapter = load_adapter(spec)
    inprocess, ddp = InProcessRuntime(), DdpRuntime(spec, timeout=300, max_pools=1)
    worst = {"float64": [0.0, 0.0], "float32": [0.0, 0.0]}
    counts = {"float64": 0, "float32": 0}
    try:
        for name, case in cases:
            if outside_supports(case, adapter.supports):
                continue
            both = run_on_both(inprocess, ddp, adapter, case, name)
            if both is None:
                continue
            a, b = both
            errors = _worst(a, b)
            assert errors is not None, f"{name}: non-finite values differ"
            assert a["padding_draws"] == b["padding_draws"], name
            w = worst[case.dtype]
            w[0], w[1] = max(w[0], errors[0]), max(w[1], errors[1])
            counts[case.dtype] += 1
    finally:
        ddp.close()
    return worst, counts


def _generated(infonce_sim, tmp_path, seed, count, padding):
    paths = export_cases(infonce_sim, tmp_path, seed, count, "--compensate", "both",
                         "--padding", padding)
    cases = []
    for path in paths:
        obj = json.loads(path.read_text())
        obj.pop("expect", None)
        cases.append((path.name, parse_case(obj)))
    return sorted(cases, key=lambda nc: (nc[1].world, nc[0]))  # one rank pool per world size


def test_conformance_inprocess_agrees_with_real_ddp(infonce_sim, tmp_path):
    cases = _generated(infonce_sim, tmp_path, 2027, CASES, "both")
    worst, counts = _run_all({"kind": "conformance"}, cases)
    print(f"conformance: {counts} cases; worst (grad, loss) {worst}")
    assert counts["float64"] >= 200, counts
    assert worst["float64"][0] <= 1e-12 and worst["float64"][1] <= 1e-12, worst
    assert worst["float32"][0] <= 1e-5 and worst["float32"][1] <= 1e-5, worst


def test_ms_swift_inprocess_agrees_with_real_ddp(infonce_sim, swift_root, tmp_path):
    """The trainer's own code through the thread-mode stand-ins and through real gloo."""
    cases = _generated(infonce_sim, tmp_path, 2028, 160, "fixed")
    spec = {"kind": "ms-swift", "swift_root": str(swift_root),
            "swift_file": "embedding_fixed_padding.py"}
    worst, counts = _run_all(spec, cases)
    print(f"ms-swift: {counts} cases; worst (grad, loss) {worst}")
    assert counts["float64"] >= 10, counts
    assert worst["float64"][0] <= 1e-12 and worst["float64"][1] <= 1e-12, worst
