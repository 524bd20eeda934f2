"""The conformance adapter's NT-Xent (strategic.ntxent_strategy_loss, SPEC section 14) at
strategy points, against the full-batch objective written here in plain torch autograd; and its
NT-Xent and SigLIP against the C++ rank programs at every point (`check --strategies all`)."""

import copy
import random
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from conftest import ROOT
from infonce_sim.adapters import load_adapter
from infonce_sim.cases.case_families import parse_case
from infonce_sim.runtime.inprocess_runtime import InProcessRuntime


def ntxent_case(counts, seed, temperature=0.3, learnable=False, strategy=None):
    rng = random.Random(seed)

    def matrix(rows, cols):
        return [[rng.gauss(0, 1) for _ in range(cols)] for _ in range(rows)]

    obj = {"format": "infonce-case/1", "family": "ntxent",
           "mesh": {"world": len(counts), "dp": len(counts)}, "reduction": "mean",
           "gather": "object", "compensate": True,
           "ntxent": {"encoder": {"normalize": True, "weight": matrix(3, 4)},
                      "temperature": temperature,
                      "batches": [[{"first": matrix(n, 4), "second": matrix(n, 4)}
                                   for n in counts]]},
           "accumulation": {"steps": 1, "normalize": True}, "learnable_temperature": learnable}
    if strategy:
        obj["strategy"] = strategy
    return obj


def full_batch(obj):
    """(loss, d/d weight, d/d tau) of SPEC 14 over every shard's samples: rows = all first
    views then all second views; row k against every other row, its positive the other
    view; the mean over the 2N rows."""
    nt = obj["ntxent"]
    weight = torch.tensor(nt["encoder"]["weight"], dtype=torch.float64, requires_grad=True)
    tau = torch.tensor(1 / nt["temperature"], dtype=torch.float64, requires_grad=True)
    micro = nt["batches"][0]
    x = torch.tensor([r for s in micro for r in s["first"]] + [r for s in micro for r in s["second"]],
                     dtype=torch.float64)
    z = F.normalize(x @ weight.T, dim=1)
    n = len(x) // 2
    total = 0
    for k in range(2 * n):
        others = [j for j in range(2 * n) if j != k]
        logits = tau * (z[k] @ z[others].T)
        positive = others.index((k + n) % (2 * n))
        total = total - torch.log_softmax(logits, dim=0)[positive]
    loss = total / (2 * n)
    loss.backward()
    return loss.item(), weight.grad, tau.grad.item()


POINTS = {  # strategy -> the towers' and tau's multiple of the full batch's (docs/strategies.md)
    "autograd/global/scale-1": (1, 1),
    "autograd/local/scale-1": (1, 1),
    "detached-own-live/global/scale-P": (1, "P"),
}


@pytest.mark.parametrize("point", sorted(POINTS))
def test_conformance_ntxent_at_its_points(point):
    gather, scope, scale = point.split("/")
    strategy = {"gather": gather, "scope": scope, "scale": scale.replace("scale-", "")
                .replace("1", "none")}
    world = 3
    obj = ntxent_case([2] * world, seed=5, learnable=True, strategy=strategy)
    loss, grad, d_tau = full_batch(obj)
    result = InProcessRuntime().run(load_adapter({"kind": "conformance"}),
                                    parse_case(copy.deepcopy(obj)))
    towers, direct = (world if m == "P" else m for m in POINTS[point])
    reported = sum(result["losses"]) / world if scope == "local" else result["losses"][0]
    assert reported == pytest.approx(loss, rel=1e-12)
    assert torch.allclose(result["grad"], towers * grad, rtol=1e-11, atol=1e-13)
    assert result["direct"]["inverse_temperature"] == pytest.approx(direct * d_tau, rel=1e-11)


def test_conformance_ntxent_without_a_strategy_is_the_trainers_point():
    """No strategy: detached-own-live/global with the fix's scale P (the C++ effective_strategy):
    the encoder's gradient is the full batch's."""
    obj = ntxent_case([1, 3], seed=9)
    loss, grad, _ = full_batch(obj)
    result = InProcessRuntime().run(load_adapter({"kind": "conformance"}), parse_case(obj))
    assert result["losses"] == [pytest.approx(loss, rel=1e-12)] * 2
    assert torch.allclose(result["grad"], grad, rtol=1e-11, atol=1e-13)


def test_conformance_declares_the_families_asked_for():
    assert load_adapter({"kind": "conformance"}).supports["families"] == ["infonce", "clip"]
    adapter = load_adapter({"kind": "conformance", "families": "ntxent,siglip"})
    assert adapter.supports["families"] == ["ntxent", "siglip"]
    with pytest.raises(ValueError, match="families=ntxent,simclr: expected some of"):
        load_adapter({"kind": "conformance", "families": "ntxent,simclr"})


@pytest.mark.parametrize("family", ["ntxent", "siglip"])
def test_conformance_is_every_points_rank_program(infonce_sim, family):
    """check --strategies all --family F --sut (the conformance adapter running the point each
    case names): its loss and gradients are the C++ rank program's at all of them (~10 s)."""
    worker = (f"{sys.executable} -m infonce_sim.worker --adapter conformance "
              f"--option families={family}")
    proc = subprocess.run([infonce_sim, "check", "--strategies", "all", "--family", family,
                           "--sut", worker, "--seed", "1", "--cases", "150", "--no-corpus"],
                          cwd=ROOT / "python", capture_output=True, text=True, timeout=600,
                          env={"PYTHONPATH": str(ROOT / "python"), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "PASS: every observed outcome is the predicted one (150 cases)" in proc.stdout
    rows = [line.split() for line in proc.stdout.splitlines() if line.startswith(family + " ")]
    assert len(rows) >= 40 and all(row[10] == "0" for row in rows)  # the mismatch column


def test_conformance_baked_at_another_point_is_caught(infonce_sim):
    """The same campaign fails a conformance SigLIP baked at autograd/global when judged at
    SigLIP's own point autograd/local (it reports the full-batch loss, not the rank's)."""
    worker = (f"{sys.executable} -m infonce_sim.worker --adapter conformance "
              "--option families=siglip --option strategy=autograd/global/scale-1/mean")
    proc = subprocess.run([infonce_sim, "check", "--strategies", "autograd/local/scale-1/mean",
                           "--family", "siglip", "--sut", worker, "--seed", "1", "--cases", "40",
                           "--no-corpus"],
                          cwd=ROOT / "python", capture_output=True, text=True, timeout=600,
                          env={"PYTHONPATH": str(ROOT / "python"), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "FAIL: 14 of 40 cases differ" in proc.stdout, proc.stdout[-3000:]
