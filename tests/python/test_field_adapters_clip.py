"""The field's built-in adapters on the INSTALLED packages: open-clip (open-clip-torch's
own open_clip/loss.py), lightly (its NTXentLoss on the NT-Xent family: test_field_ntxent.py),
ms-swift (an installed ms-swift's embedding.py where one is found), and `python -m
infonce_sim.field` on one adapter.

Known verdicts, each of which fails if the code under test changed: open_clip's ClipLoss is,
against the full-batch gradient of the same cases (the conformance adapter at
autograd/global/scale-1/mean), default: towers exactly 1/P, logit scale correct; local_loss:
towers no multiple of it (dropped terms), logit scale correct (equal shards); gather_with_grad
and both: correct. Skipped, with the reason, only when a package is not installed.
"""

import copy
import importlib.metadata
import json
import os
import pathlib
import re
import subprocess
import sys

import pytest
import torch

from conftest import ROOT
from strategy_key_cases import clip_case
from infonce_sim.adapters import load_adapter
from infonce_sim.adapters._loading import package_dir
from infonce_sim.cases.case_families import parse_case
from infonce_sim.runtime.inprocess_runtime import InProcessRuntime

FULL_BATCH = {"gather": "autograd", "scope": "global", "scale": "none", "reduction": "mean"}


def _installed(distribution, package):
    try:
        version = importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        pytest.skip(f"{distribution} is not installed (python/requirements/field-nodeps.txt)")
    if package_dir(package) is None:
        pytest.skip(f"{distribution} {version}: no {package} package directory")
    return version


def _worker(*args, env=None):
    return subprocess.run([sys.executable, "-m", "infonce_sim.worker", *args],
                          cwd=ROOT / "python", stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=300, env=env)


def _ratio(got, want):
    """(least-squares ratio of got to want, worst residual relative to |want|)."""
    g, w = got.flatten(), want.flatten()
    r = float(g @ w / (w @ w)) if float(w @ w) > 0 else float("nan")
    return r, float((g - r * w).abs().max()) / max(float(w.abs().max()), 1e-300)


@pytest.mark.parametrize("local_loss, gather_with_grad", [(False, False), (True, False),
                                                          (False, True), (True, True)])
def test_open_clip_installed_loss_has_its_known_verdict(local_loss, gather_with_grad):
    _installed("open-clip-torch", "open_clip")
    adapter = load_adapter({"kind": "open-clip", "local_loss": local_loss,
                            "gather_with_grad": gather_with_grad})
    assert adapter.path == package_dir("open_clip") / "loss.py"  # the installed file
    runtime, conformance = InProcessRuntime(), load_adapter({"kind": "conformance"})
    residuals, judged = [], 0
    for i in range(12):
        obj = clip_case(28, i, equal=True, bias=False, strategy=False, meshes=[(2, 2), (3, 3)])
        case = parse_case(obj)
        got = runtime.run(adapter, case)
        full = copy.deepcopy(obj)
        full["strategy"] = dict(FULL_BATCH)
        want = runtime.run(conformance, parse_case(full))
        # the logit scale: correct at all four points (equal shards)
        assert got["direct"]["log_logit_scale"] == pytest.approx(
            want["direct"]["log_logit_scale"], rel=1e-9, abs=1e-12)
        if float(want["grad"].abs().max()) < 1e-9:
            continue  # a zero reference (D = 1, normalised towers): every ratio fits
        judged += 1
        ratio, residual = _ratio(got["grad"], want["grad"])
        if gather_with_grad:
            assert ratio == pytest.approx(1, rel=1e-9) and residual < 1e-9, (i, ratio)
        elif not local_loss:  # the towers get exactly 1/P
            assert ratio == pytest.approx(1 / case.dp, rel=1e-9) and residual < 1e-9, (i, ratio)
        residuals.append(residual)
    assert judged >= 6, judged
    if local_loss and not gather_with_grad:  # dropped terms: no single ratio
        assert max(residuals) > 1e-3, residuals

def test_open_clip_shared_copy_option_still_loads(open_clip_root):
    adapter = load_adapter({"kind": "open-clip", "open_clip_root": str(open_clip_root)})
    assert str(adapter.path).startswith(str(open_clip_root))


def test_lightly_ntxent_loads_from_the_installed_package_and_declares_the_ntxent_family():
    _installed("lightly", "lightly")
    from infonce_sim.adapters import lightly_ntxent
    ntxent, _ = lightly_ntxent.load_ntxent()
    module = sys.modules[ntxent.__module__]
    assert pathlib.Path(module.__file__) == package_dir("lightly") / "loss" / "ntx_ent_loss.py"
    assert "torchvision" not in sys.modules  # the stand-in is gone after loading
    assert module.dist.GatherLayer.backward is not None  # lightly.utils.dist, the real file
    # single process: lightly's loss is (L0 + L1) / 2 over both views' rows
    out0, out1 = torch.randn(3, 2, dtype=torch.float64), torch.randn(3, 2, dtype=torch.float64)
    value = ntxent(temperature=0.5)(out0, out1)
    a, b = torch.nn.functional.normalize(out0, dim=1), torch.nn.functional.normalize(out1, dim=1)
    rows = torch.cat([a, b])
    logits = rows @ rows.T / 0.5
    logits.fill_diagonal_(float("-inf"))
    want = torch.nn.functional.cross_entropy(logits, torch.tensor([3, 4, 5, 0, 1, 2]))
    assert float(value) == pytest.approx(float(want), rel=1e-12)
    proc = _worker("--adapter", "lightly")
    assert proc.returncode == 0, proc.stderr
    shake = json.loads(proc.stdout.splitlines()[0])
    assert shake["supports"]["families"] == ["ntxent"]  # runs on the NT-Xent family now
    assert shake["supports"]["reported_loss"] == "rank-local"


@pytest.mark.optional_install  # CI leaves ms-swift out (scripts/python-env-swift.sh: 804 MB)
def test_ms_swift_installed_file_has_the_fix():
    sites = [s for s in os.environ.get("INFONCE_SWIFT_SITES", "").split(os.pathsep) if s]
    if sites:
        option = ["--option", f"swift_root={sites[0]}"]
    elif package_dir("swift") is not None:
        option = []
    else:
        pytest.skip("ms-swift is not installed here (nor INFONCE_SWIFT_SITES set): the shared "
                    "copy is tested by test_ms_swift.py")
    proc = _worker("--adapter", "ms-swift", *option)
    assert proc.returncode == 0, proc.stderr
    shake = json.loads(proc.stdout.splitlines()[0])
    assert shake["supports"]["padding"] == ["fixed"]  # ms-swift 4.6.0 pads with row j + 2


def test_field_table_on_open_clip(tmp_path, infonce_sim):
    _installed("open-clip-torch", "open_clip")
    out = tmp_path / "field.md"
    proc = subprocess.run(
        [sys.executable, "-m", "infonce_sim.field", "--adapter", "open-clip", "--match",
         "gather_with_grad=false", "--cases", "12", "--sim", infonce_sim, "--out", str(out),
         "--corpus-dir", str(tmp_path / "found")],
        cwd=ROOT / "python", capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    table = out.read_text()
    assert table == proc.stdout
    rows = [line for line in table.splitlines() if line.startswith("| open-clip")]
    assert len(rows) == 2, table  # --match: the two without gather_with_grad
    by_options = {r.split(" | ")[2].split(";")[0]: r for r in rows}
    default = by_options["local_loss=false, gather_with_grad=false"]
    assert "ratio 1/P (as predicted" in default and "| bug |" in default, default
    local = by_options["local_loss=true, gather_with_grad=false"]
    assert "dropped terms) (as predicted" in local and "| bug |" in local, local
    assert "Bugs found: 2:" in table and "reproduce: `" in table, table
    # issue 28: per adapter, its lines of code (+ metadata), the version and the verdicts
    assert re.search(r"\| `open-clip` \| 3\.3[.\d]* \| \d+ \(\+\d+\) \| 2 bug \|", table), table
    small = sorted((tmp_path / "found").glob("clip-small-*.json"))  # replay FILE fails on them
    assert small and all(str(f) in table for f in small), table  # (one case may serve both)
