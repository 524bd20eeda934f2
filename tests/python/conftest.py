"""Shared fixtures of the infonce_sim tests (run by ctest, tests/python/CMakeLists.txt).

Environment (ctest sets it; defaults suit a checkout next to ../shared):
  INFONCE_SIM           the infonce-sim binary (export: generated cases), optional
  INFONCE_THIRD_PARTY   the third-party folder holding ms-swift/
  INFONCE_REAL_TRAINER  the real-trainer cases folder (cases/, ref/)
  INFONCE_NO_SKIP=1     a skipped test fails instead (CI: a package or file the set-up
                        should have provided is missing, and a skip would hide it), but for
                        tests marked optional_install: their package is one the set-up leaves
                        out on purpose (ms-swift's 800 MB venv)
"""

import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))

import torch  # noqa: E402

torch.set_num_threads(1)


def pytest_configure(config):
    config.addinivalue_line("markers", "optional_install: the test needs a package that the "
                            "set-up leaves out on purpose; it may skip under INFONCE_NO_SKIP=1")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if (report.skipped and os.environ.get("INFONCE_NO_SKIP") == "1"
            and item.get_closest_marker("optional_install") is None):
        report.outcome = "failed"
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.longrepr = f"skipped under INFONCE_NO_SKIP=1: {reason}"


def run_on_both(inprocess, ddp, adapter, case, label):
    """The case on the in-process runtime and under real DDP: both results, or None when both
    raised (an error on one runtime alone fails the test, naming `label`)."""
    results = []
    for runtime in (inprocess, ddp):
        try:
            results.append(runtime.run(adapter, case))
        except Exception as e:  # noqa: BLE001 - then the other runtime must fail as well
            results.append(e)
    a, b = results
    if isinstance(a, Exception) or isinstance(b, Exception):
        assert isinstance(a, Exception) and isinstance(b, Exception), (label, a, b)
        return None
    return a, b


def env_path(name, default):
    return pathlib.Path(os.environ.get(name) or default)


@pytest.fixture(scope="session")
def real_trainer():
    path = env_path("INFONCE_REAL_TRAINER", ROOT / "corpus" / "real-trainer")
    assert (path / "cases").is_dir(), f"no real-trainer cases in {path}"
    return path


@pytest.fixture(scope="session")
def swift_root():
    path = env_path("INFONCE_THIRD_PARTY", ROOT.parent / "shared" / "third_party") / "ms-swift"
    if not (path / "swift" / "loss" / "embedding.py").is_file():
        pytest.skip(f"ms-swift not found under {path} (set INFONCE_THIRD_PARTY)")
    return path


@pytest.fixture(scope="session")
def infonce_sim():
    path = os.environ.get("INFONCE_SIM")
    if not path or not pathlib.Path(path).is_file():
        pytest.skip("INFONCE_SIM (the infonce-sim binary) not set: no generated cases")
    return path


def export_cases(binary, directory, seed, count, *extra):
    """Generated cases (padding draws recorded) written by `infonce-sim export`."""
    subprocess.run([binary, "export", "--seed", str(seed), "--cases", str(count), "--limits",
                    "typical", *extra, str(directory)], check=True, capture_output=True)
    return sorted(directory.glob("*.json"))


def load_json_case(path):
    with open(path, encoding="utf-8") as f:
        obj = json.load(f)
    obj.pop("expect", None)
    obj.pop("found", None)
    return obj


@pytest.fixture(scope="session")
def open_clip_root():
    """An open_clip checkout holding src/open_clip/loss.py (../shared/third_party/open_clip)."""
    path = env_path("INFONCE_THIRD_PARTY", ROOT.parent / "shared" / "third_party") / "open_clip"
    if not (path / "src" / "open_clip" / "loss.py").is_file():
        pytest.skip(f"open_clip's src/open_clip/loss.py not found under {path} "
                    "(set INFONCE_THIRD_PARTY)")
    return path
