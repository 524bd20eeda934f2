"""The strategy keys on the torch side: `strategy`, `learnable_temperature` and
`"family": "clip"`, with the conformance adapter.

- in-process vs real DDP (gloo, one process per rank) on seeded generated cases
  (strategy_key_cases.py): every rank's loss, reduced encoder gradient and direct-parameter
  gradient agree within 1e-12 in float64 (1e-5 in float32), at least 100 float64 cases per
  family, every strategy point;
- the in-process runtime gives the same bits twice, and a strategy key naming the
  trainer's point gives the bits of the case without it;
- the InfoNCE strategy points match the C++ rank program (`infonce-sim run`, when
  INFONCE_SIM is set);
- the strategy points' predictions of docs/strategies.md hold on equal batches (the
  encoders' and the direct parameters' ratio to the full-batch gradient);
- the worker answers CLIP and strategy requests over stdin/stdout, and rejects keys its
  adapter did not declare.
"""

import copy
import json
import math
import os
import subprocess
import sys
import time

import pytest
import torch
import torch.nn.functional as F

from conftest import ROOT, run_on_both
from strategy_key_cases import POINTS, clip_case, infonce_case
from infonce_sim.adapters import load_adapter
from infonce_sim.cases.case_families import parse_case
from infonce_sim.runtime.ddp import DdpRuntime
from infonce_sim.runtime.inprocess_runtime import InProcessRuntime
from infonce_sim.cases.spec import reference
from infonce_sim.runtime.strategic import clip_objective
from infonce_sim.cases.strategy import has_gather

CASES = int(os.environ.get("INFONCE_STRATEGY_KEY_CASES", "200"))  # per family, before float32


def _errors(a, b):
    """Worst (gradient, loss, direct) difference, each relative to max(|value|, 1)."""
    grad = max(float((x - y).abs().max()) / max(float(y.abs().max()), 1.0)
               for x, y in zip(a["grads"], b["grads"]))
    loss = max(abs(x - y) / max(abs(y), 1.0) for x, y in zip(a["losses"], b["losses"]))
    direct = 0.0
    assert (a.get("direct") is None) == (b.get("direct") is None)
    if a.get("direct") is not None:
        assert a["direct"].keys() == b["direct"].keys()
        for da, db in zip(a["directs"], b["directs"]):
            direct = max([direct] + [abs(da[k] - db[k]) / max(abs(db[k]), 1.0) for k in da])
    return grad, loss, direct


def _finite(result):
    return all(math.isfinite(x) for x in result["losses"]) and all(
        bool(torch.isfinite(g).all()) for g in result["grads"])


def test_inprocess_agrees_with_real_ddp_on_both_families():
    adapter = load_adapter({"kind": "conformance"})
    cases = []
    for i in range(CASES + CASES // 4):  # every 5th one float32
        dtype = "float32" if i % 5 == 4 else "float64"
        cases.append(("infonce", parse_case(infonce_case(2026, i, dtype=dtype))))
        cases.append(("clip", parse_case(clip_case(2026, i, dtype=dtype))))
    cases.sort(key=lambda fc: fc[1].world)  # one rank pool per world size
    inprocess, ddp = InProcessRuntime(), DdpRuntime({"kind": "conformance"}, max_pools=4)
    worst = {(f, d): [0.0, 0.0, 0.0] for f in ("infonce", "clip") for d in ("float64", "float32")}
    counts = {key: 0 for key in worst}
    gathered = {key: 0 for key in worst}  # of them, with a gather (use_batch, P > 1)
    points = {"infonce": set(), "clip": set()}
    failures = 0
    start = time.monotonic()
    try:
        for family, case in cases:
            both = run_on_both(inprocess, ddp, adapter, case, case)
            if both is None:
                failures += 1
                continue
            a, b = both
            assert _finite(a) and _finite(b), case
            key = (family, case.dtype)
            for k, e in enumerate(_errors(a, b)):
                worst[key][k] = max(worst[key][k], e)
            counts[key] += 1
            gathered[key] += has_gather(case)
            if case.strategy is not None and has_gather(case):
                points[family].add(case.strategy.point())
            if family == "infonce":
                assert a["padding_draws"] == b["padding_draws"]
                assert (a.get("direct") is not None) == case.learnable_temperature
    finally:
        ddp.close()
    seconds = time.monotonic() - start
    print(f"\nstrategy-key agreement: {counts} cases, {gathered} with a gather "
          f"({failures} rejected by both) in {seconds:.1f} s; "
          f"{ {f: len(p) for f, p in points.items()} } strategy points with a gather; "
          f"worst (grad, loss, direct) {worst}")
    for family in ("infonce", "clip"):
        assert counts[(family, "float64")] >= min(100, CASES), counts
        assert gathered[(family, "float64")] >= min(100, CASES // 2), gathered
        assert max(worst[(family, "float64")]) <= 1e-12, worst
        assert max(worst[(family, "float32")]) <= 1e-5, worst
        assert len(points[family]) == len(POINTS) or CASES < len(POINTS), points[family]


def test_the_same_clip_case_gives_the_same_bits_twice():
    adapter = load_adapter({"kind": "conformance"})
    first, second = InProcessRuntime(), InProcessRuntime()
    for i in range(40):
        case = parse_case(clip_case(7, i))
        a, b, c = first.run(adapter, case), first.run(adapter, case), second.run(adapter, case)
        for other in (b, c):
            assert a["losses"] == other["losses"]
            assert all(torch.equal(x, y) for x, y in zip(a["grads"], other["grads"]))
            assert a["directs"] == other["directs"]


def test_the_trainer_point_gives_the_bits_of_no_strategy():
    """MODEL.md 3.7: a strategy key naming the trainer's point changes nothing."""
    adapter = load_adapter({"kind": "conformance"})
    runtime = InProcessRuntime()
    compared = 0
    for i in range(60):
        obj = infonce_case(11, i, learnable=False)
        obj.pop("strategy", None)
        use_batch = obj["loss"]["use_batch"]
        compensates = use_batch and obj["reduction"] == "mean"
        plain = runtime.run(adapter, parse_case(obj))
        obj["strategy"] = {"gather": "detached-own-live", "scope": "global",
                           "scale": "P" if compensates else "none", "reduction": obj["reduction"]}
        keyed = runtime.run(adapter, parse_case(obj))
        assert plain["losses"] == keyed["losses"], i
        assert all(torch.equal(x, y) for x, y in zip(plain["grads"], keyed["grads"])), i
        assert plain["padding_draws"] == keyed["padding_draws"], i
        compared += 1
    assert compared == 60


def test_conformance_strategies_match_infonce_sim_run(infonce_sim, tmp_path):
    """The InfoNCE strategy points (no learnable temperature) against the C++ rank program,
    `infonce-sim run --case FILE --json` (step/rank_program.cpp, loss/infonce_local.cpp):
    the same losses and gradient within 1e-10 of max(|value|, 1)."""
    adapter = load_adapter({"kind": "conformance"})
    runtime = InProcessRuntime()
    worst, compared, points = 0.0, 0, set()
    for i in range(200):
        obj = infonce_case(77, i, learnable=False)
        path = tmp_path / f"case{i}.json"
        path.write_text(json.dumps(obj))
        run = subprocess.run([infonce_sim, "run", "--case", str(path), "--json"],
                             capture_output=True, text=True)
        case = parse_case(obj)
        if run.returncode == 2:  # rejected: the torch step must reject it too
            with pytest.raises(Exception):
                runtime.run(adapter, case)
            continue
        want = json.loads(run.stdout.splitlines()[-1])
        got = runtime.run(adapter, case)
        grad = torch.tensor(want["grad"], dtype=torch.float64)
        worst = max([worst, float((got["grad"] - grad).abs().max()) / max(
            float(grad.abs().max()), 1.0)] + [abs(a - b) / max(abs(b), 1.0)
                                              for a, b in zip(got["losses"], want["losses"])])
        compared += 1
        if case.strategy is not None and has_gather(case):
            points.add(case.strategy.point())
    print(f"\ninfonce-sim run: {compared} cases, {len(points)} strategy points with a gather, "
          f"worst {worst:.3g}")
    assert compared >= 150 and len(points) == len(POINTS)
    assert worst <= 1e-10


# -- the predictions of docs/strategies.md on equal batches ---------------------------------


def _clip_full_batch(case):
    """The full-batch CLIP objective's gradient (towers, log scale), written here."""
    image_weight = torch.tensor(case.image_weight, dtype=torch.float64, requires_grad=True)
    text_weight = torch.tensor(case.text_weight, dtype=torch.float64, requires_grad=True)
    log_scale = torch.tensor(case.log_logit_scale, dtype=torch.float64, requires_grad=True)
    divisor = case.steps if case.ga_normalize else 1
    total = 0
    for shards in case.batches:
        image = F.linear(torch.cat([torch.tensor(s[0], dtype=torch.float64) for s in shards]),
                         image_weight)
        text = F.linear(torch.cat([torch.tensor(s[1], dtype=torch.float64) for s in shards]),
                        text_weight)
        if case.image_normalize:
            image = F.normalize(image, dim=1, eps=1e-12)
        if case.text_normalize:
            text = F.normalize(text, dim=1, eps=1e-12)
        total = total + clip_objective(image, text, image, text, 0, log_scale.exp(), None) / divisor
    total.backward()
    return torch.cat([image_weight.grad, text_weight.grad], dim=1), float(log_scale.grad)


def _b(gather, scope, p):
    """(encoders' b, direct b) of docs/strategies.md's derivation, equal batches."""
    encoders = {("detached-own-live", "global"): 1, ("detached", "global"): 0,
                ("autograd", "global"): p, ("autograd", "local"): p}.get((gather, scope))
    return encoders, p


def test_clip_points_give_the_predicted_ratios_on_equal_batches():
    adapter = load_adapter({"kind": "conformance"})
    runtime = InProcessRuntime()
    checked = 0
    for i, (gather, scope, scale, reduction) in enumerate(POINTS * 2):
        obj = clip_case(31, i, equal=True, bias=False, meshes=[(2, 2), (4, 2), (3, 3)])
        obj["reduction"] = reduction
        obj["strategy"] = {"gather": gather, "scope": scope, "scale": scale,
                           "reduction": reduction}
        case = parse_case(obj)
        got = runtime.run(adapter, case)
        want_grad, want_scale = _clip_full_batch(case)
        p, w = case.dp, case.world
        s = {"none": 1, "P": p, "W": w}[scale]
        kappa = 1 / p if reduction == "mean" else 1
        b_encoders, b_direct = _b(gather, scope, p)
        direct = got["direct"]["log_logit_scale"]
        assert abs(direct - kappa * s * b_direct * want_scale) <= 1e-11 * max(abs(want_scale), 1)
        if b_encoders is not None:
            ratio = kappa * s * b_encoders
            err = float((got["grad"] - ratio * want_grad).abs().max())
            assert err <= 1e-11 * max(float(want_grad.abs().max()), 1), (case.strategy, err)
        checked += 1
    assert checked == 72


def test_learnable_temperature_gradient_is_the_full_batch_one_at_autograd_global():
    """autograd/global/scale-1/mean: encoders and tau both get the full-batch gradient
    (dL/dtau = -T^2 dL/dT, by central differences of the reference in T)."""
    import dataclasses

    adapter = load_adapter({"kind": "conformance"})
    runtime = InProcessRuntime()
    checked = 0
    for i in range(40):
        obj = infonce_case(41, i, learnable=True)
        obj["reduction"] = "mean"
        obj["strategy"] = {"gather": "autograd", "scope": "global", "scale": "none",
                           "reduction": "mean"}
        obj["encoder"]["normalize"] = True
        obj["loss"]["temperature"] = 0.5
        obj["loss"]["hard_negatives"] = None
        if not obj["loss"]["use_batch"]:
            continue
        case = parse_case(obj)
        got = runtime.run(adapter, case)
        ref = reference(case)
        t, h = case.loss.temperature, 1e-6 * case.loss.temperature
        loss_at = lambda x: reference(dataclasses.replace(  # noqa: E731
            case, loss=dataclasses.replace(case.loss, temperature=x)))["loss"]
        want_tau = -t * t * (loss_at(t + h) - loss_at(t - h)) / (2 * h)
        assert float((got["grad"] - ref["grad"]).abs().max()) <= 1e-10 * max(
            float(ref["grad"].abs().max()), 1)
        assert abs(got["direct"]["inverse_temperature"] - want_tau) <= 1e-7 * max(
            abs(want_tau), 1)
        checked += 1
    assert checked >= 25


# -- the worker --------------------------------------------------------------------------------


def _session(args, requests):
    proc = subprocess.Popen([sys.executable, "-m", "infonce_sim.worker", *args],
                            cwd=ROOT / "python", stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate("".join(json.dumps(r) + "\n" for r in requests), timeout=600)
    return [json.loads(line) for line in out.splitlines()], err, proc.returncode


def test_worker_answers_clip_and_strategy_requests():
    clip = clip_case(3, 5, bias=True)
    strategy = infonce_case(3, 4, learnable=True)
    no_bias = clip_case(3, 8, bias=False)
    requests = [{"id": 0, "case": clip}, {"id": 1, "case": strategy},
                {"id": 2, "case": no_bias}]
    lines, err, code = _session(["--adapter", "conformance"], requests)
    assert code == 0, err
    supports = lines[0]["supports"]
    assert supports["families"] == ["infonce", "clip"] and supports["logit_bias"] is True
    for key in ("strategy", "learnable_temperature", "family"):
        assert key in supports["extension_keys"]
    runtime, adapter = InProcessRuntime(), load_adapter({"kind": "conformance"})
    for request, response in zip(requests, lines[1:]):
        assert response["id"] == request["id"] and "error" not in response, response
        case = parse_case(copy.deepcopy(request["case"]))
        want = runtime.run(adapter, case)
        assert response["losses"] == want["losses"]
        assert response["grad"] == want["grad"].tolist()
        assert response["direct"] == want["direct"]
        assert len(response["grads"]) == case.world
    clip_response = lines[1]
    width = len(clip["clip"]["image_tower"]["weight"][0]) + len(clip["clip"]["text_tower"]["weight"][0])
    assert len(clip_response["grad"]) == len(clip["clip"]["image_tower"]["weight"])
    assert all(len(row) == width for row in clip_response["grad"])
    assert set(clip_response["direct"]) == {"log_logit_scale", "logit_bias"}
    assert "padding_draws" not in clip_response
    assert set(lines[3]["direct"]) == {"log_logit_scale"}
    assert set(lines[2]["direct"]) == {"inverse_temperature"}
    assert len(lines[2]["padding_draws"]) == strategy["accumulation"]["steps"]


def test_worker_rejects_undeclared_keys(tmp_path):
    """An adapter that declares none of the strategy keys gets one-line errors for them."""
    module = tmp_path / "plain_adapter.py"
    module.write_text(
        "from infonce_sim.adapters.conformance import ConformanceAdapter, SUPPORTS\n"
        "class Plain(ConformanceAdapter):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.supports = dict(SUPPORTS, extension_keys=['dtype'])\n"
        "        del self.supports['families']\n"
        "def make(**options):\n"
        "    return Plain()\n")
    clip = clip_case(3, 5, strategy=False)
    learnable = infonce_case(3, 37 * 3 - 1 + 37, learnable=True)  # no strategy key
    learnable.pop("strategy", None)
    proc = subprocess.Popen([sys.executable, "-m", "infonce_sim.worker", "--adapter",
                             "plain_adapter:make"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={"PYTHONPATH": f"{ROOT / 'python'}:{tmp_path}", "PATH": "/usr/bin"})
    requests = [{"id": 0, "case": clip}, {"id": 1, "case": infonce_case(3, 1)},
                {"id": 2, "case": learnable}]
    out, err = proc.communicate("".join(json.dumps(r) + "\n" for r in requests), timeout=300)
    assert proc.returncode == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert lines[1]["error"] == "case.family: not declared in extension_keys"
    assert lines[2]["error"] == "case.strategy: not declared in extension_keys"
    assert lines[3]["error"] == "case.learnable_temperature: not declared in extension_keys"


@pytest.mark.parametrize("change, message", [
    (lambda c: c["clip"].update(batches=[[{"image": [[1.0, 2.0]], "text": []}]]),
     "clip.batches[0][0].text: empty"),
    (lambda c: c.update(strategy={"gather": "autograd", "scope": "local", "scale": "P",
                                  "reduction": "sum"}, reduction="mean"),
     "strategy.reduction: sum differs from the case's reduction mean"),
    (lambda c: c.update(learnable_temperature=True), "learnable_temperature: unknown key"),
    (lambda c: c.update(strategy={"gather": "x", "scope": "local", "scale": "P"}),
     "strategy.gather: expected one of detached-own-live, detached, autograd"),
])
def test_bad_clip_cases_name_the_key(change, message):
    import re

    from infonce_sim.cases.case import CaseError
    obj = clip_case(1, 1, meshes=[(1, 1)])
    obj["accumulation"]["steps"] = 1
    obj["clip"]["batches"] = obj["clip"]["batches"][:1]
    change(obj)
    with pytest.raises(CaseError, match=re.escape(message)):
        parse_case(obj)


def test_a_rank_without_an_own_query_joins_the_autograd_gathers_backward_under_ddp():
    """A local loss over an autograd gather on a rank whose shard is empty: its loss is 0,
    but it must still run the gather's backward (a collective under real DDP), or every
    other rank waits for it. (The strategy campaign through real DDP hung here.)"""
    raw = {
        "format": "infonce-case/1", "mesh": {"world": 2, "dp": 2}, "reduction": "mean",
        "gather": "tensor", "compensate": True,
        "loss": {"temperature": 0.1, "use_batch": True, "hard_negatives": None,
                 "padding": "fixed", "mask_fake_negative": False, "fake_neg_margin": 0.1,
                 "include_qq": False, "include_dd": False},
        "encoder": {"normalize": True, "weight": [[1.0, 0.5], [-0.5, 1.0]]},
        "accumulation": {"steps": 1, "normalize": True}, "rng": {"mode": "synced", "seed": 1},
        "strategy": {"gather": "autograd", "scope": "local", "scale": "W", "reduction": "mean"},
        "batches": [[[], [[[1.0, 0.0], [0.9, 0.1]], [[0.2, 1.0], [-0.3, 0.8]]]]],
    }
    case = parse_case(raw)
    adapter = load_adapter({"kind": "conformance"})
    ddp = DdpRuntime({"kind": "conformance"}, timeout=60.0)
    try:
        b = ddp.run(adapter, case)
    finally:
        ddp.close()
    a = InProcessRuntime().run(adapter, case)
    assert a["losses"][1] > 0 and a["losses"][0] == 0
    assert max(_errors(a, b)) <= 1e-12
