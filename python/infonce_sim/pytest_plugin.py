"""pytest plugin: check a data-parallel InfoNCE loss inside a project's own test suite.

    def test_loss_matches_one_big_batch(infonce_check):
        infonce_check("infonce_adapter:make")

The `infonce_check` fixture runs a campaign (`infonce_sim.check`) on the adapter and turns a
failure into an assertion: the verdict, the shrunk case in one line and the one command that
reproduces it. Each test keeps its failing cases in a directory the project commits
(`infonce_corpus`, default `.infonce-sim/corpus/<test file>/<test name>/` under the rootdir);
they are replayed first on every later run, before any new case is generated.

Profiles (`--infonce-profile`, default `ci` when the CI variable is set, else `dev`):

| profile | seed | cases |
|---|---|---|
| `ci` | 1, fixed: every run checks the same cases | 200 |
| `dev` | 1, fixed | 50 |
| `explore` | new each run, printed in the header (`--infonce-seed` reruns it) | 2000 |

`--infonce-seed` and `--infonce-cases` override the profile's.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest

from . import api

PROFILES: dict[str, dict[str, Any]] = {
    "ci": {"seed": 1, "cases": 200},
    "dev": {"seed": 1, "cases": 50},
    "explore": {"seed": None, "cases": 2000},  # None: a new seed each run
}


@dataclass(frozen=True)
class Settings:
    profile: str
    seed: Any
    cases: int
    corpus: Path  # relative to the rootdir


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("infonce-sim", "infonce-sim: data-parallel InfoNCE checks")
    group.addoption("--infonce-profile", choices=sorted(PROFILES), default=None,
                    help="ci: fixed seed, 200 cases; dev: fixed seed, 50 cases; explore: a "
                    "new seed each run, 2000 cases (default: ci when CI is set, else dev)")
    group.addoption("--infonce-seed", default=None,
                    help="campaign seed (a number, 0xHEX, a git commit, or 'git')")
    group.addoption("--infonce-cases", type=int, default=None, help="cases per check")
    parser.addini("infonce_corpus", "where failing cases are saved and replayed from "
                  "(relative to the rootdir)", default=".infonce-sim/corpus")


def _settings(config: pytest.Config) -> Settings:
    cached = getattr(config, "_infonce_settings", None)
    if cached is not None:
        return cached
    profile = config.getoption("--infonce-profile") or ("ci" if os.environ.get("CI") else "dev")
    seed = config.getoption("--infonce-seed")
    if seed is None:
        seed = PROFILES[profile]["seed"]
    if seed is None:
        seed = secrets.randbelow(2**32)
    cases = config.getoption("--infonce-cases") or PROFILES[profile]["cases"]
    settings = Settings(profile, seed, cases, Path(config.getini("infonce_corpus")))
    config._infonce_settings = settings  # type: ignore[attr-defined]
    return settings


def pytest_configure(config: pytest.Config) -> None:
    config._infonce_lines = []  # type: ignore[attr-defined]


def pytest_report_header(config: pytest.Config) -> str:
    s = _settings(config)
    rerun = f" (rerun: --infonce-seed {s.seed})" if s.profile == "explore" else ""
    return (f"infonce-sim: profile {s.profile}, seed {s.seed}{rerun}, {s.cases} cases per "
            f"check, corpus {s.corpus}/")


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    lines = getattr(config, "_infonce_lines", [])
    if lines:
        terminalreporter.section("infonce-sim")
        for line in lines:
            terminalreporter.write_line(line)


def _slug(nodeid: str) -> Path:
    """tests/test_loss.py::test_x[a/b] -> tests/test_loss.py/test_x[a_b]"""
    parts = [re.sub(r"[^\w.\-\[\]=,]", "_", p) for p in nodeid.replace("::", "/").split("/")]
    return Path(*[p for p in parts if p not in ("", ".", "..")])


def _case_line(path: Path) -> str:
    """A saved case in one line: mesh, accumulation, groups per rank, sizes, loss settings."""
    try:
        case = json.loads(path.read_text())
        mesh, loss = case.get("mesh", {}), case.get("loss", {})
        steps = case.get("batches", [])
        groups = [[len(shard) for shard in micro] for micro in steps]
        weight = case.get("encoder", {}).get("weight", [[]])
        return (f"W={mesh.get('world')} P={mesh.get('dp')} A={len(steps)} "
                f"groups={groups} F={len(weight[0])} D={len(weight)} "
                f"T={loss.get('temperature')} use_batch={loss.get('use_batch')} "
                f"reduction={case.get('reduction')} dtype={case.get('dtype', 'float64')}")
    except (OSError, ValueError, TypeError, AttributeError, IndexError):
        return str(path)


def _check(request: pytest.FixtureRequest, adapter: api.Adapter, **kwargs: Any) -> api.CheckResult:
    __tracebackhide__ = True
    config = request.config
    s = _settings(config)
    root = Path(config.rootpath)
    corpus = s.corpus / _slug(request.node.nodeid)
    lines: list[str] = config._infonce_lines  # type: ignore[attr-defined]
    runtime = kwargs.pop("runtime", "inprocess")
    options = kwargs.get("options")
    saved = sorted((root / corpus).glob("*.json"))
    if saved:
        replayed = api.replay_corpus(corpus, adapter, runtime=runtime, options=options, cwd=root)
        lines.append(f"{request.node.nodeid}: replayed {replayed.count} saved case(s) from "
                     f"{corpus}/ first: {len(replayed.passed_files)} passed, "
                     f"{len(replayed.failed)} failed" +
                     (f", {replayed.outside} outside the adapter" if replayed.outside else ""))
        if replayed.failed:
            first = replayed.failed[0].split()
            file = first[1] if len(first) > 1 else str(corpus)
            detail = replayed.failed[0].split(None, 2)[2] if len(first) > 2 else ""
            raise AssertionError(
                f"infonce-sim: a saved case fails again ({len(replayed.failed)} of "
                f"{replayed.count} replayed first): {detail}\n"
                f"shrunk case: {_case_line(root / file)}\n"
                f"reproduce:   {shlex.join([replayed.command[0], 'replay', file])} --sut "
                f"{shlex.quote(replayed.sut_command)}")
    kwargs.setdefault("seed", s.seed)
    kwargs.setdefault("cases", s.cases)
    report_dir = request.getfixturevalue("tmp_path") / "infonce-sim"
    result = api.check(adapter, runtime=runtime, corpus_dir=corpus, report_dir=report_dir,
                       cwd=root, **kwargs)
    lines.append(f"{request.node.nodeid}: {result.cases} cases, seed {result.seed}: "
                 f"{'passed' if result.passed else 'FAILED'}")
    if not result.passed:
        saved_line = ""
        if result.failure and result.failure.case_file:
            saved_line = (f"\nsaved:       {result.failure.case_file.relative_to(root)} "
                          "(commit it: the next run replays it first)")
        raise AssertionError(f"infonce-sim: {result.summary()}{saved_line}\n"
                             f"report:      {result.report_paths[0]}")
    return result


@pytest.fixture
def infonce_check(request: pytest.FixtureRequest) -> Callable[..., api.CheckResult]:
    """`infonce_check(adapter, **check_options)`: replay this test's saved failing cases,
    then run a campaign on `adapter` (see `infonce_sim.check`); a failure is an assertion."""

    def run(adapter: api.Adapter, **kwargs: Any) -> api.CheckResult:
        __tracebackhide__ = True
        return _check(request, adapter, **kwargs)

    return run
