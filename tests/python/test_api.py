"""infonce_sim.check, replay, classify: the engine from Python, through its CLI."""

import json
import os
import pathlib
import shlex
import stat
import sys

import pytest

from infonce_sim import api

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "torch-project"


@pytest.fixture
def cli(monkeypatch):
    path = os.environ.get("INFONCE_SIM")
    if not path or not pathlib.Path(path).is_file():
        pytest.skip("INFONCE_SIM (the infonce-sim binary) not set")
    return path


@pytest.fixture
def example(monkeypatch):
    """The example project's loss and adapter importable, here and in the worker."""
    for path in (EXAMPLE, EXAMPLE / "tests"):
        monkeypatch.syspath_prepend(str(path))
    monkeypatch.delenv("CONTRASTIVE_LOSS_BUG", raising=False)
    import infonce_adapter
    return infonce_adapter


def make_nothing(**_options):
    """A top-level factory: passed as an object, the worker gets its module:name."""
    return None


def test_sut_command_forms(tmp_path):
    def local_factory():
        return None

    by_name = api.sut_command("pkg.mod:make", cwd=tmp_path)
    assert shlex.split(by_name)[-4:] == ["--adapter", "pkg.mod:make", "--runtime", "inprocess"]
    assert "-m infonce_sim.worker" in by_name
    assert api.sut_command("./my-worker --flag", cwd=tmp_path) == "./my-worker --flag"
    assert api.sut_command(["my worker", "-x"], cwd=tmp_path) == "'my worker' -x"
    assert f"--adapter {__name__}:make_nothing" in api.sut_command(make_nothing, cwd=tmp_path)
    assert "--option a=1" in api.sut_command("m:f", options={"a": 1}, cwd=tmp_path)
    with pytest.raises(api.InfonceSimError, match="expected"):
        api.sut_command(local_factory, cwd=tmp_path)
    with pytest.raises(api.InfonceSimError, match="module:function"):
        api.sut_command("conformanc", cwd=tmp_path)


def test_an_adapter_object_reaches_the_worker_pickled(tmp_path, example):
    adapter = example.GatheredInfoNCE()
    adapter.note = "state set in the caller"
    command = api.sut_command(adapter, cwd=tmp_path, scratch=tmp_path)
    assert "--adapter infonce_sim.api:load_pickled" in command
    copy = api.load_pickled(str(tmp_path / "adapter.pickle"), max_world=8)
    assert type(copy) is type(adapter) and copy.note == "state set in the caller"


def test_the_worker_imports_with_the_callers_path(tmp_path, monkeypatch):
    (tmp_path / "src").mkdir()
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    command = api.sut_command("m:f", cwd=tmp_path)
    assert command.startswith("PYTHONPATH=src")
    assert sys.prefix not in command.split(" ")[0]


def test_check_passes_on_a_correct_loss(cli, tmp_path, example):
    result = api.check("infonce_adapter:make", cases=12, seed=3, report_dir=tmp_path / "r",
                       cwd=tmp_path)
    assert result.passed and result.failure is None
    assert result.verdict.startswith("PASSED"), result.verdict
    assert result.cases == 12 and result.seed == 3
    assert json.loads(result.report_paths[0].read_text())["result"] == "passed"


def test_check_reports_the_shrunk_failure_and_its_reproducer(cli, tmp_path, example,
                                                             monkeypatch):
    monkeypatch.setenv("CONTRASTIVE_LOSS_BUG", "unscaled")
    result = api.check(example.GatheredInfoNCE(), cases=30, seed=1, cwd=tmp_path,
                       corpus_dir="corpus", report_dir=tmp_path / "r")
    assert not result.passed
    failure = result.failure
    assert result.verdict.startswith("FAILED at case"), result.verdict
    assert any(p.startswith("gradient-matches-reference:") and "ratio 0.5" in p
               for p in failure.properties), failure.properties
    assert failure.shrunk.startswith("W=2 P=2 ")
    assert failure.case_file and failure.case_file.is_file()
    assert failure.reproduce.startswith(f"{cli} replay corpus/")
    replayed = api.replay(failure.case_file, example.GatheredInfoNCE(), cwd=tmp_path)
    assert not replayed.passed and replayed.failed_properties
    monkeypatch.delenv("CONTRASTIVE_LOSS_BUG")
    fixed = api.replay_corpus("corpus", "infonce_adapter:make", cwd=tmp_path)
    assert fixed.passed and fixed.count == 1


def test_a_usage_error_is_an_exception_not_a_verdict(cli, tmp_path):
    with pytest.raises(api.InfonceSimError, match="exited 2"):
        api.check("conformance", cases=1, restrict=["no_such_axis=1"], cwd=tmp_path,
                  report_dir=tmp_path)


def test_classify_names_a_cli_without_the_command(tmp_path, monkeypatch):
    old = tmp_path / "infonce-sim"
    old.write_text("#!/bin/sh\n"
                   "case \"$1\" in --version) echo 'infonce-sim 0.1.0';;\n"
                   "*) echo \"infonce-sim: error: unknown command '$1'\" >&2; exit 2;; esac\n")
    old.chmod(old.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("INFONCE_SIM", str(old))
    with pytest.raises(api.InfonceSimError, match="has no `classify` command"):
        api.classify("conformance", cwd=tmp_path)
