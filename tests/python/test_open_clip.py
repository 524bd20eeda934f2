"""The `open-clip` adapter: open_clip's real ClipLoss (../shared/third_party/open_clip, never
copied) on both runtimes, against the conformance adapter at its strategy point.

For each of its four option combinations (local_loss x gather_with_grad), on seeded CLIP
cases with equal shards (ClipLoss's gathers and targets assume them), no logit bias and W
= P (it gathers over the default group): the in-process runtime gives the conformance
adapter's numbers at the matching point of docs/strategies.md within 1e-12 (float64), and
real DDP gives the in-process numbers within 1e-12 (float64) / 1e-5 (float32). Skipped
when open_clip's loss.py is absent.
"""

import copy
import json
import os
import subprocess
import sys
import time

import pytest
import torch

from conftest import ROOT
from strategy_key_cases import clip_case
from infonce_sim.adapters import load_adapter
from infonce_sim.cases.case_families import parse_case
from infonce_sim.runtime.ddp import DdpRuntime
from infonce_sim.runtime.inprocess_runtime import InProcessRuntime

CASES = int(os.environ.get("INFONCE_OPEN_CLIP_CASES", "30"))  # per option combination
MESHES = [(1, 1), (2, 2), (3, 3), (4, 4)]
COMBINATIONS = [(False, False), (True, False), (False, True), (True, True)]
POINTS = {(False, False): ("detached-own-live", "global"), (True, False): ("detached", "local"),
          (False, True): ("autograd", "global"), (True, True): ("autograd", "local")}


def _worst(a, b):
    grad = max(float((x - y).abs().max()) / max(float(y.abs().max()), 1.0)
               for x, y in zip(a["grads"], b["grads"]))
    loss = max(abs(x - y) / max(abs(y), 1.0) for x, y in zip(a["losses"], b["losses"]))
    direct = max(abs(x["log_logit_scale"] - y["log_logit_scale"]) /
                 max(abs(y["log_logit_scale"]), 1.0) for x, y in zip(a["directs"], b["directs"]))
    return max(grad, loss, direct)


def _cases(seed):
    objs = []
    for i in range(CASES):
        dtype = "float32" if i % 5 == 4 else "float64"
        objs.append(clip_case(seed, i, dtype=dtype, equal=True, bias=False, strategy=False,
                              meshes=MESHES))
    return sorted(objs, key=lambda o: o["mesh"]["world"])


@pytest.mark.parametrize("local_loss, gather_with_grad", COMBINATIONS)
def test_open_clip_matches_conformance_at_its_point_on_both_runtimes(
        open_clip_root, local_loss, gather_with_grad):
    spec = {"kind": "open-clip", "open_clip_root": str(open_clip_root),
            "local_loss": local_loss, "gather_with_grad": gather_with_grad}
    adapter = load_adapter(spec)
    gather, scope = POINTS[(local_loss, gather_with_grad)]
    assert adapter.point == f"{gather}/{scope}/scale-1/mean"
    conformance = load_adapter({"kind": "conformance"})
    inprocess, ddp = InProcessRuntime(), DdpRuntime(spec, max_pools=4)
    worst = {"conformance": 0.0, "ddp64": 0.0, "ddp32": 0.0}
    counts = {"float64": 0, "float32": 0}
    start = time.monotonic()
    try:
        for obj in _cases(100 + 2 * local_loss + gather_with_grad):
            case = parse_case(obj)
            got = inprocess.run(adapter, case)
            real = ddp.run(adapter, case)
            key = "ddp64" if case.dtype == "float64" else "ddp32"
            worst[key] = max(worst[key], _worst(got, real))
            counts[case.dtype] += 1
            if case.dtype == "float64":
                at_point = copy.deepcopy(obj)
                at_point["strategy"] = {"gather": gather, "scope": scope, "scale": "none",
                                        "reduction": "mean"}
                want = inprocess.run(conformance, parse_case(at_point))
                worst["conformance"] = max(worst["conformance"], _worst(got, want))
    finally:
        ddp.close()
    print(f"\nopen_clip {adapter.point}: {counts} cases in {time.monotonic() - start:.1f} s; "
          f"worst {worst}")
    assert counts["float64"] >= min(20, CASES), counts
    assert worst["conformance"] <= 1e-12 and worst["ddp64"] <= 1e-12, worst
    assert worst["ddp32"] <= 1e-5, worst


def test_open_clip_with_unequal_shards_fails_in_process(open_clip_root):
    """ClipLoss gathers zeros_like(own features): shards of different sizes are an error
    (as under real gloo), reported as the step's error, not a wrong number."""
    adapter = load_adapter({"kind": "open-clip", "open_clip_root": str(open_clip_root)})
    obj = clip_case(5, 0, equal=True, bias=False, strategy=False, meshes=[(2, 2)])
    obj["clip"]["batches"][0][1]["image"].append([0.5] * len(obj["clip"]["batches"][0][1]
                                                             ["image"][0]))
    obj["clip"]["batches"][0][1]["text"].append([0.25] * len(obj["clip"]["batches"][0][1]
                                                             ["text"][0]))
    with pytest.raises(Exception, match="shape"):
        InProcessRuntime().run(adapter, parse_case(obj))


def test_worker_runs_open_clip_over_the_protocol(open_clip_root):
    objs = [clip_case(9, i, equal=True, bias=False, strategy=False, meshes=MESHES)
            for i in range(4)]
    requests = [{"id": i, "case": obj} for i, obj in enumerate(objs)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "infonce_sim.worker", "--adapter", "open-clip",
         "--open-clip-root", str(open_clip_root), "--option", "local_loss=true",
         "--option", "gather_with_grad=true"],
        cwd=ROOT / "python", stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate("".join(json.dumps(r) + "\n" for r in requests), timeout=300)
    assert proc.returncode == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    supports = lines[0]["supports"]
    assert "autograd/local/scale-1/mean" in lines[0]["name"]
    assert supports["families"] == ["clip"] and supports["logit_bias"] is False
    assert supports["extension_keys"] == ["dtype", "family"]
    assert supports["compensate_false"] is False and supports["reductions"] == ["mean"]
    adapter = load_adapter({"kind": "open-clip", "open_clip_root": str(open_clip_root),
                            "local_loss": True, "gather_with_grad": True})
    runtime = InProcessRuntime()
    for obj, response in zip(objs, lines[1:]):
        assert "error" not in response, response
        want = runtime.run(adapter, parse_case(obj))
        assert response["losses"] == want["losses"]
        assert response["grad"] == want["grad"].tolist()
        assert response["direct"] == want["direct"]
    # A strategy is baked into its options: the key is refused, like a logit bias.
    refused = [{"id": 0, "case": clip_case(9, 0, meshes=MESHES)},
               {"id": 1, "case": clip_case(9, 1, bias=True, strategy=False, meshes=MESHES)}]
    proc = subprocess.Popen([sys.executable, "-m", "infonce_sim.worker", "--adapter", "open-clip",
                             "--open-clip-root", str(open_clip_root)], cwd=ROOT / "python",
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    out, err = proc.communicate("".join(json.dumps(r) + "\n" for r in refused), timeout=300)
    lines = [json.loads(line) for line in out.splitlines()]
    assert lines[1]["error"] == "case.strategy: not declared in extension_keys"
    assert lines[2]["error"].startswith("clip.logit_bias: outside")


def test_an_open_clip_path_that_does_not_exist_exits_2():
    proc = subprocess.run([sys.executable, "-m", "infonce_sim.worker", "--adapter", "open-clip",
                           "--open-clip-root", "/nonexistent"], cwd=ROOT / "python",
                          input="", capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert "/nonexistent/src/open_clip/loss.py" in proc.stderr
