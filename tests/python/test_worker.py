"""The infonce-sut/1 worker: handshake, request/response round trip, errors, exits."""

import json
import pathlib
import subprocess
import sys

import pytest

from conftest import ROOT, load_json_case

PYTHON = sys.executable


def start(*args):
    return subprocess.Popen([PYTHON, "-m", "infonce_sim.worker", *args], cwd=ROOT / "python",
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def session(args, requests):
    """Every line the worker printed on stdout, its stderr and exit status."""
    proc = start(*args)
    out, err = proc.communicate("".join(r if isinstance(r, str) else json.dumps(r) + "\n"
                                        for r in requests), timeout=600)
    return [json.loads(line) for line in out.splitlines()], err, proc.returncode


def max_rel(got, want):
    flat = lambda m: [x for row in m for x in row]  # noqa: E731
    scale = max(abs(x) for x in flat(want))
    return max(abs(a - b) for a, b in zip(flat(got), flat(want))) / scale


def test_handshake_and_round_trip(real_trainer):
    paths = sorted((real_trainer / "cases").glob("w4d2-*-fixed.json"))[:3]
    cases = [load_json_case(p) for p in paths]
    requests = [{"id": i, "case": c} for i, c in enumerate(cases)]
    lines, err, code = session(["--adapter", "conformance"], requests)
    assert code == 0, err
    hello = lines[0]
    assert hello["protocol"] == "infonce-sut/1"
    assert "conformance" in hello["name"] and "in-process" in hello["name"]
    assert hello["supports"]["max_world"] == 8 and hello["supports"]["compensate_false"] is True
    for i, (path, response) in enumerate(zip(paths, lines[1:])):
        expect = json.loads(path.read_text())["expect"]
        world = cases[i]["mesh"]["world"]
        assert response["id"] == i and "error" not in response
        assert len(response["losses"]) == world and len(response["grads"]) == world
        assert abs(response["losses"][0] - expect["loss"]) <= 1e-10 * abs(expect["loss"])
        assert max_rel(response["grad"], expect["grad"]) <= 1e-10
        steps = cases[i]["accumulation"]["steps"]
        assert len(response["padding_draws"]) == steps
        assert all(len(micro) == world for micro in response["padding_draws"])
        if "padding_draws" in cases[i]:  # replayed: the DP shard's stream on every replica
            replicas = world // cases[i]["mesh"]["dp"]
            assert response["padding_draws"] == [[micro[w // replicas] for w in range(world)]
                                                 for micro in cases[i]["padding_draws"]]
    assert len(lines) == 1 + len(cases)


def test_bad_requests_get_one_line_errors_and_the_worker_goes_on(real_trainer):
    case = load_json_case(sorted((real_trainer / "cases").glob("w2d2-*-fixed.json"))[0])
    unknown = dict(case, colour="blue")
    bad_world = json.loads(json.dumps(case))
    bad_world["mesh"]["world"] = 3
    big = json.loads(json.dumps(case))
    big["mesh"] = {"world": 16, "dp": 2}
    requests = ["this is not json\n", {"id": 1, "case": unknown}, {"id": 2, "case": bad_world},
                {"id": 3}, {"id": 4, "case": big, "extra": 1}, {"id": 5, "case": big},
                {"id": 6, "case": case}]
    lines, err, code = session(["--adapter", "conformance"], requests)
    assert code == 0, err
    responses = lines[1:]
    assert [r["id"] for r in responses] == [None, 1, 2, 3, 4, 5, 6]
    assert "JSONDecodeError" in responses[0]["error"]
    assert responses[1]["error"] == "colour: unknown key"
    assert "mesh.dp" in responses[2]["error"]
    assert responses[3]["error"] == "request.case: missing"
    assert responses[4]["error"] == "request.extra: unknown key"
    assert responses[5]["error"].startswith("mesh.world: outside")
    assert "error" not in responses[6] and len(responses[6]["losses"]) == 2
    assert all("\n" not in r.get("error", "") for r in responses)


def test_trainer_prints_go_to_stderr(tmp_path, real_trainer):
    """An adapter that prints (as trainers do) must not corrupt the protocol on stdout."""
    module = tmp_path / "noisy_adapter.py"
    module.write_text(
        "from infonce_sim.adapters.conformance import ConformanceAdapter\n"
        "class Noisy(ConformanceAdapter):\n"
        "    def loss(self, ctx, embeddings, labels):\n"
        "        print('hello from rank', ctx.world_rank)\n"
        "        return (yield from super().loss(ctx, embeddings, labels))\n"
        "def make(**options):\n"
        "    return Noisy()\n")
    case = load_json_case(sorted((real_trainer / "cases").glob("w2d2-*-fixed.json"))[0])
    proc = subprocess.Popen([PYTHON, "-m", "infonce_sim.worker", "--adapter", "noisy_adapter:make"],
                            cwd=ROOT / "python", stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={"PYTHONPATH": f"{ROOT / 'python'}:{tmp_path}", "PATH": "/usr/bin"})
    out, err = proc.communicate(json.dumps({"id": 0, "case": case}) + "\n", timeout=300)
    assert proc.returncode == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert len(lines) == 2 and "losses" in lines[1]
    assert "hello from rank 0" in err


def test_an_adapter_may_decline_a_case_with_a_reason(tmp_path, real_trainer):
    """infonce_sim.Declined, raised by the adapter's loss or returned by its decline(case)
    hook, is a {"declined": reason} response: not an error, and the worker goes on."""
    module = tmp_path / "choosy_adapter.py"
    module.write_text(
        "from infonce_sim import Declined\n"
        "from infonce_sim.adapters.conformance import ConformanceAdapter\n"
        "class Choosy(ConformanceAdapter):\n"
        "    def decline(self, case):\n"
        "        return 'world 4: not on this trainer' if case.world == 4 else None\n"
        "    def loss(self, ctx, embeddings, labels):\n"
        "        if ctx.case.steps > 1:\n"
        "            raise Declined('gradient accumulation:\\n not used')\n"
        "        return (yield from super().loss(ctx, embeddings, labels))\n"
        "def make(**options):\n"
        "    return Choosy()\n")
    two = load_json_case(sorted((real_trainer / "cases").glob("w2d2-*-fixed.json"))[0])
    four = load_json_case(sorted((real_trainer / "cases").glob("w4d2-*-fixed.json"))[0])
    accumulated = json.loads(json.dumps(two))
    accumulated["batches"] = accumulated["batches"] * 2
    accumulated["accumulation"]["steps"] = len(accumulated["batches"])
    two["batches"] = two["batches"][:1]
    two["accumulation"] = {"steps": 1, "normalize": True}
    accumulated.pop("padding_draws", None)
    proc = subprocess.Popen([PYTHON, "-m", "infonce_sim.worker", "--adapter", "choosy_adapter:make"],
                            cwd=ROOT / "python", stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={"PYTHONPATH": f"{ROOT / 'python'}:{tmp_path}", "PATH": "/usr/bin"})
    requests = [{"id": 0, "case": four}, {"id": 1, "case": accumulated}, {"id": 2, "case": two}]
    out, err = proc.communicate("".join(json.dumps(r) + "\n" for r in requests), timeout=300)
    assert proc.returncode == 0, err
    responses = [json.loads(line) for line in out.splitlines()][1:]
    assert responses[0] == {"id": 0, "declined": "world 4: not on this trainer"}
    assert responses[1] == {"id": 1, "declined": "gradient accumulation: not used"}
    assert "losses" in responses[2] and "declined" not in responses[2]


@pytest.mark.parametrize("args, message", [
    (["--adapter", "no_such_module:make"], "cannot import no_such_module"),
    (["--adapter", "nonsense"], "expected one of conformance, ms-swift, open-clip"),
    (["--adapter", "ms-swift", "--swift-root", "/nonexistent"], "/nonexistent: no "),
])
def test_an_adapter_that_cannot_load_exits_2_with_one_line(args, message):
    lines, err, code = session(args, [])
    assert code == 2 and lines == []
    assert message in err and len(err.strip().splitlines()) == 1


def test_ms_swift_declares_what_the_file_does(swift_root):
    for name, padding in (("embedding.py", "legacy"), ("embedding_fixed_padding.py", "fixed")):
        lines, err, code = session(["--adapter", "ms-swift", "--swift-root", str(swift_root),
                                    "--swift-file", name], [])
        assert code == 0, err
        supports = lines[0]["supports"]
        assert supports["padding"] == [padding]
        assert supports["compensate_false"] is False
        assert supports["reductions"] == ["mean"] and supports["gathers"] == ["object"]
        assert supports["max_replicas"] == 2
        assert name in lines[0]["name"]


def test_the_readme_adapter_runs(tmp_path, real_trainer):
    """python/README.md's example adapter, verbatim, on a stand-in trainer loss that gathers
    over the world with torch.distributed and compensates (the fixed trainer)."""
    readme = (ROOT / "python" / "README.md").read_text()
    blocks = [block.split("```", 1)[0] for block in readme.split("```python\n")[1:]]
    code = next(block for block in blocks if block.startswith("# my_adapter.py"))
    (tmp_path / "my_adapter.py").write_text(code)
    (tmp_path / "my_trainer").mkdir()
    (tmp_path / "my_trainer" / "__init__.py").write_text("")
    (tmp_path / "my_trainer" / "loss.py").write_text(
        "import torch, torch.distributed as dist\n"
        "from infonce_sim.cases.case import LossSettings\n"
        "from infonce_sim.cases.spec import DrawStream, infonce_loss\n"
        "def info_nce(embeddings, labels, temperature):\n"
        "    world, rank = dist.get_world_size(), dist.get_rank()\n"
        "    slots, all_labels = [None] * world, [None] * world\n"
        "    dist.all_gather_object(slots, embeddings.detach())\n"
        "    dist.all_gather_object(all_labels, labels)\n"
        "    slots[rank] = embeddings\n"
        "    settings = LossSettings(temperature, True, None, 'fixed', False, 0.1, False, False)\n"
        "    loss = infonce_loss(torch.cat(slots), torch.cat(all_labels), settings, None)\n"
        "    return loss * world - loss.detach() * (world - 1)\n")
    paths = [p for p in sorted((real_trainer / "cases").glob("w?d?-*-fixed.json"))
             if (lambda c: c["loss"]["use_batch"] and c["loss"]["hard_negatives"] is None
                 and c["mesh"]["world"] == c["mesh"]["dp"] and not c["loss"]["include_qq"]
                 and not c["loss"]["include_dd"] and not c["loss"]["mask_fake_negative"])(
                     json.loads(p.read_text()))]
    assert paths, "no real-trainer case without hard negatives or replicas"
    requests = [{"id": i, "case": load_json_case(p)} for i, p in enumerate(paths)]
    proc = subprocess.Popen([PYTHON, "-m", "infonce_sim.worker", "--adapter", "my_adapter:make"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True,
                            env={"PYTHONPATH": f"{ROOT / 'python'}:{tmp_path}", "PATH": "/usr/bin"})
    out, err = proc.communicate("".join(json.dumps(r) + "\n" for r in requests), timeout=300)
    assert proc.returncode == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert lines[0]["name"].startswith("my_trainer.loss.info_nce")
    for path, response in zip(paths, lines[1:]):
        expect = json.loads(path.read_text())["expect"]
        assert "error" not in response, response
        assert max_rel(response["grad"], expect["grad"]) <= 1e-10


def test_the_readme_documents_what_an_adapter_gets_and_returns():
    """python/README.md's adapter reference names every RankContext member an adapter uses
    (the conformance adapter and the field's adapters use each), and the loss's pair return."""
    readme = (ROOT / "python" / "README.md").read_text()
    for member in ("inputs(micro)", "encode(x)", "direct", "dp_group", "replayed_draws()",
                   "autograd_gather", "decline(case)"):
        assert f"`{member}`" in readme, member
    assert "(backpropagated, reported)" in readme and "zero leaf" in readme
