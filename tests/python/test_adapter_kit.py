"""The adapter API that keeps the built-in adapters within 30 lines (issue 28): adapters/_kit.py,
_loading.py and _standins.py, each helper on a small input whose answer is written here."""

import os
import sys
import types

import numpy as np
import pytest
import torch

from infonce_sim.adapters import _kit, _loading, _standins
from infonce_sim.cases.case import CaseError


# -- _kit ----------------------------------------------------------------------------------------


def test_handshake_puts_the_fields_on_top_and_leaves_none_out():
    shake = _kit.handshake("4", gathers=["object"], min_dim=None, padding=["fixed"])
    assert shake == {"use_batch": [True], "reductions": ["mean"], "gathers": ["object"],
                     "dtypes": ["float64", "float32"], "max_world": 4, "max_replicas": 1,
                     "compensate_false": False, "accumulation_normalize": [True, False],
                     "extension_keys": ["dtype"], "padding": ["fixed"]}


def test_configured_point_reads_the_field_tables_configurations():
    configurations = [{"a": "false", "_point": "p/one"}, {"a": "true", "b": "x", "_point": "p/two"}]
    assert _kit.configured_point(configurations, {"a": False}) == "p/one"
    assert _kit.configured_point(configurations, {"a": True, "b": "x"}) == "p/two"
    with pytest.raises(ValueError, match="no configuration declares a strategy point for a=True"):
        _kit.configured_point(configurations, {"a": True})


def test_also_with_repeats_each_configuration_with_the_options_and_says_so():
    assert _kit.also_with({"min_dim": "2"}, [{"_label": "L", "k": "v"}]) == [
        {"_label": "L", "k": "v"}, {"_label": "L, min_dim=2", "k": "v", "min_dim": "2"}]
    assert _kit.also_with({"min_dim": "2"}, []) == []


def test_set_environment_writes_str_values_and_unsets_none(monkeypatch):
    monkeypatch.setenv("KITTEST_GONE", "stale")
    settings = types.SimpleNamespace(temperature=0.1, use_batch=True, gone=None)
    _kit.set_environment("KITTEST_", settings, ("temperature", "use_batch", "gone"))
    assert (os.environ["KITTEST_TEMPERATURE"], os.environ["KITTEST_USE_BATCH"]) == ("0.1", "True")
    assert "KITTEST_GONE" not in os.environ
    monkeypatch.delenv("KITTEST_TEMPERATURE")
    monkeypatch.delenv("KITTEST_USE_BATCH")


def _splitter(offset):
    """A group splitter that pads by repeating row j + offset (j: the draw, here 0)."""
    def split(rows, labels, hard_negatives):
        assert labels.tolist() == [1, 0] and hard_negatives == 2
        return [torch.cat([rows, rows[offset:offset + 1]])]
    return split


def test_padding_of_asks_the_trainers_splitter():
    assert _kit.padding_of(_splitter(1), "f.py") == "legacy"
    assert _kit.padding_of(_splitter(2), "f.py") == "fixed"
    with pytest.raises(ValueError, match="f.py: hard-negative padding is neither"):
        _kit.padding_of(_splitter(0), "f.py")


def test_a_clip_only_adapter_refuses_an_infonce_case_as_a_case_error():
    adapter = type("A", (_kit.ClipOnly,), {"name": "my ClipLoss"})()
    with pytest.raises(CaseError, match="my ClipLoss: runs CLIP cases only"):
        adapter.loss(None, None, None)


# -- _loading ------------------------------------------------------------------------------------


def test_source_file_prefers_the_file_then_the_root(tmp_path):
    (tmp_path / "pkg_kt").mkdir()
    (tmp_path / "pkg_kt" / "loss.py").write_text("")
    assert str(_loading.source_file("pkg_kt/loss.py", file="/x/y.py")) == "/x/y.py"
    assert _loading.source_file("pkg_kt/loss.py", str(tmp_path)) == tmp_path / "pkg_kt" / "loss.py"
    with pytest.raises(ValueError, match=f"{tmp_path}: no file {tmp_path}/pkg_kt/other.py"):
        _loading.source_file("pkg_kt/other.py", str(tmp_path))
    with pytest.raises(ValueError, match="not both"):
        _loading.source_file("pkg_kt/loss.py", str(tmp_path), "/x/y.py")


def test_source_file_finds_the_installed_package_then_a_layered_site(tmp_path, monkeypatch):
    site = tmp_path / "site"
    (site / "pkg_kt_layered").mkdir(parents=True)
    (site / "pkg_kt_layered" / "__init__.py").write_text("raise ImportError('never run')\n")
    monkeypatch.setenv("INFONCE_PKG_KT_LAYERED_SITES", str(site))
    assert _loading.layered_sites("pkg_kt_layered/x.py") == [str(site)]
    assert _loading.source_file("pkg_kt_layered/x.py") == site / "pkg_kt_layered" / "x.py"
    monkeypatch.syspath_prepend(str(site))  # now installed here: its directory, __init__ not run
    assert _loading.source_file("pkg_kt_layered/x.py") == site / "pkg_kt_layered" / "x.py"
    assert _loading.installs("pkg-kt", "pkg_kt_layered/x.py") == [(None, None, None)]
    with pytest.raises(ValueError, match="no installed package found: give DIR"):
        _loading.source_file("pkg_kt_absent/x.py", hint="give DIR")


def test_installs_names_each_layered_site_with_its_version(tmp_path, monkeypatch):
    site = tmp_path / ".venv-x" / "lib" / "python3.11" / "site-packages"
    (site / "pkg_kt_inst").mkdir(parents=True)
    (site / "pkg_kt_inst" / "loss.py").write_text("")
    (site / "pkg_kt_inst-1.2.3.dist-info").mkdir()
    (site / "pkg_kt_inst-1.2.3.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: pkg-kt-inst\nVersion: 1.2.3\n")
    monkeypatch.setenv("INFONCE_PKG_KT_INST_SITES", str(site))
    assert _loading.installs("pkg-kt-inst", "pkg_kt_inst/loss.py") == [(str(site), "1.2.3",
                                                                         ".venv-x")]
    assert _loading.installs("pkg-kt-inst", "pkg_kt_inst/other.py") == []


def test_load_file_gives_stand_ins_while_the_file_loads_only(tmp_path):
    path = tmp_path / "trainer_kt.py"
    path.write_text("from kt_lib.utils import helper\nfrom kt_pkg.sub import base\n"
                    "VALUE = helper(2) + base\n")
    standins = {"kt_lib.utils": {"helper": lambda x: 10 * x}, "kt_pkg.sub": {"base": 1}}
    module = _loading.load_file(path, "trainer_kt_under_test", standins)
    assert module.VALUE == 21 and sys.modules["trainer_kt_under_test"] is module
    assert not {"kt_lib", "kt_lib.utils", "kt_pkg", "kt_pkg.sub"} & set(sys.modules)
    with pytest.raises(ValueError, match="no file"):
        _loading.load_file(tmp_path / "absent.py", "absent_kt")


def test_load_file_stands_in_for_torch_compiler_where_torch_lacks_it(tmp_path, monkeypatch):
    path = tmp_path / "compiled_kt.py"
    path.write_text("import torch\n@torch.compiler.disable\ndef f(x):\n    return x + 1\n")
    monkeypatch.delattr(torch, "compiler")
    assert _loading.load_file(path, "compiled_kt").f(1) == 2


# -- _standins -----------------------------------------------------------------------------------


def _rank(replayed=None):
    return types.SimpleNamespace(micro=0, dp_rank=1, draws=[[]], dp=2,
                                 replayed_draws=lambda: replayed)


def test_running_names_the_rank_for_the_stand_ins_and_the_trainers_failure():
    ctx, view = _rank(), _standins.RankAttributes(dp=lambda c: c.dp)
    assert _standins.running_rank() is None and view.dp is None
    with _standins.running(ctx, "my loss"):
        assert _standins.running_rank() is ctx and view.dp == 2
    assert _standins.running_rank() is None
    with pytest.raises(RuntimeError, match="my loss raised IndexError: boom"):
        with _standins.running(ctx, "my loss"):
            raise IndexError("boom")
    with pytest.raises(CaseError, match="^a case error$"):
        with _standins.running(ctx, "my loss"):
            raise CaseError("a case error")
    assert _standins.running_rank() is None


def test_numpy_view_replays_the_recorded_draws_and_records_them():
    np_ = _standins.NUMPY_REPLAYING_DRAWS
    assert np_.arange(3).tolist() == [0, 1, 2]  # numpy itself otherwise
    ctx = _rank(replayed=[2, 0, 1])
    with _standins.running(ctx, "t"):
        assert np_.random.choice([0, 1, 2], size=2).tolist() == [2, 0]
        assert np_.random.choice([0, 1, 2], size=1).tolist() == [1]
    assert ctx.draws == [[2, 0, 1]]
    with pytest.raises(CaseError, match=r"padding_draws\[0\]\[1\]: 1 draws left unused"):
        with _standins.running(_rank(replayed=[2, 0, 1]), "t"):
            np_.random.choice([0, 1, 2], size=2)
    with pytest.raises(CaseError, match="ran out of draws"):
        with _standins.running(_rank(replayed=[0]), "t"):
            np_.random.choice([0, 1], size=2)
    with pytest.raises(CaseError, match=r"an index outside \[0, 2\)"):
        with _standins.running(_rank(replayed=[5]), "t"):
            np_.random.choice([0, 1], size=1)


def test_numpy_view_draws_with_numpys_generator_when_nothing_is_replayed():
    np.random.seed(7)
    want = np.random.choice(4, size=3).tolist()
    np.random.seed(7)
    ctx = _rank()
    with _standins.running(ctx, "t"):
        assert _standins.NUMPY_REPLAYING_DRAWS.random.choice(4, size=3).tolist() == want
    assert ctx.draws == [want]


def test_strtobool_is_distutils():
    assert [_standins.strtobool(v) for v in ("True", "yes", "1", "off", "F", "0")] == \
        [1, 1, 1, 0, 0, 0]
    with pytest.raises(ValueError, match="invalid truth value 'maybe'"):
        _standins.strtobool("maybe")
