"""The pytest plugin on the example project (examples/torch-project), in pytest subprocesses:
profiles, the failure an engineer reads, and the corpus replayed first."""

import pathlib
import re
import shutil

import pytest

pytest_plugins = ["pytester"]

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "torch-project"
PLUGIN = ("-p", "infonce_sim.pytest_plugin", "-p", "no:cacheprovider")


@pytest.fixture
def project(pytester, monkeypatch):
    """A copy of the example project, without its committed corpus."""
    shutil.copytree(EXAMPLE / "contrastive", pytester.path / "contrastive")
    (pytester.path / "tests").mkdir()
    for name in ("pyproject.toml", "tests/infonce_adapter.py", "tests/test_loss.py"):
        shutil.copy(EXAMPLE / name, pytester.path / name)
    monkeypatch.setenv("PYTHONPATH", str(ROOT / "python"))
    for name in ("CI", "CONTRASTIVE_LOSS_BUG"):
        monkeypatch.delenv(name, raising=False)
    return pytester


def header(project, *args):
    result = project.runpytest_subprocess(*PLUGIN, "--collect-only", *args)
    return next(line for line in result.outlines if line.startswith("infonce-sim: profile"))


def test_profiles(project, monkeypatch):
    assert header(project).startswith("infonce-sim: profile dev, seed 1, 50 cases")
    assert header(project, "--infonce-cases", "7").startswith("infonce-sim: profile dev, seed 1, 7 cases")
    monkeypatch.setenv("CI", "1")
    assert header(project).startswith("infonce-sim: profile ci, seed 1, 200 cases")
    seeds = {re.search(r"rerun: --infonce-seed (\d+)", header(project, "--infonce-profile",
                                                              "explore")).group(1)
             for _ in range(2)}
    assert len(seeds) == 2  # a new seed each run
    assert "seed 77 (rerun: --infonce-seed 77)" in header(project, "--infonce-profile", "explore", "--infonce-seed", "77")


def test_a_failure_is_saved_then_replayed_first(project, monkeypatch):
    monkeypatch.setenv("CONTRASTIVE_LOSS_BUG", "unscaled")
    first = project.runpytest_subprocess(*PLUGIN, "--infonce-cases", "30")
    first.assert_outcomes(failed=1)
    first.stdout.fnmatch_lines([
        "E   *AssertionError: infonce-sim: FAILED at case * (shrunk in * steps): *ratio 0.5*",
        "E   *shrunk case: W=2 P=2 *",
        "E   *reproduce: * replay .infonce-sim/corpus/tests/test_loss.py/"
        "test_info_nce_matches_one_big_batch/case-*.json --sut *",
        "E   *saved: *(commit it: the next run replays it first)",
    ])
    saved = sorted((project.path / ".infonce-sim" / "corpus").rglob("case-*.json"))
    assert len(saved) == 1

    again = project.runpytest_subprocess(*PLUGIN, "--infonce-cases", "30")
    again.assert_outcomes(failed=1)
    again.stdout.fnmatch_lines([
        "E   *infonce-sim: a saved case fails again (1 of 1 replayed first)*",
        "E   *shrunk case: W=2 P=2 A=1 groups=*",
        "*replayed 1 saved case(s) from .infonce-sim/corpus/* first: 0 passed, 1 failed",
    ])
    assert " cases, seed " not in again.stdout.str()  # no campaign after the saved case failed

    monkeypatch.delenv("CONTRASTIVE_LOSS_BUG")
    fixed = project.runpytest_subprocess(*PLUGIN, "--infonce-cases", "30")
    fixed.assert_outcomes(passed=1)
    fixed.stdout.fnmatch_lines([
        "*replayed 1 saved case(s) from .infonce-sim/corpus/* first: 1 passed, 0 failed",
        "*test_info_nce_matches_one_big_batch: 30 cases, seed 1: passed",
    ])
