"""The in-process torch.distributed backend (python/infonce_sim/runtime/backend.py): torch's own
entry points, called from a trainer's code, answer for the virtual rank (thread mode), one
test per entry point; torch's autograd gather against real gloo DDP; determinism; a
trainer's missing `import torch.distributed.nn` fails in-process as under real DDP."""

import json
import os
import pathlib
import subprocess
import sys
import textwrap
import time

import pytest
import torch
import torch.distributed as dist
from torch.distributed import all_gather as bound_all_gather  # bound before any case runs
from torch.distributed import all_reduce as bound_all_reduce
from torch.distributed import get_rank as bound_get_rank

from infonce_sim.runtime.backend import ShapeMismatch
from infonce_sim.runtime.inprocess import DeadlockError, RuntimeError_
from infonce_sim.runtime.inprocess_runtime import InProcessRuntime
from test_runtime import ThreadAdapter, make_case

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
F64 = torch.float64


def run_ranks(body, world=4, dp=4, runtime=None):
    """Run body(ctx) on every rank of a case (thread mode); {world rank: its return}."""
    seen = {}

    def loss(ctx, embeddings, labels):
        seen[ctx.world_rank] = body(ctx)
        return embeddings.sum() * 0

    (runtime or InProcessRuntime()).run(ThreadAdapter(loss), make_case(world=world, dp=dp))
    return seen


def ops_of(runtime, world):
    return {op for _, op, _ in runtime.world(world).log}


def test_functions_bound_at_import():
    def body(ctx):
        w = ctx.world_rank
        out = [torch.zeros(2, dtype=F64) for _ in range(4)]
        bound_all_gather(out, torch.full((2,), float(w), dtype=F64))
        total = torch.tensor([float(w)], dtype=F64)
        bound_all_reduce(total)
        return bound_get_rank(), [float(t[0]) for t in out], float(total)

    assert run_ranks(body) == {w: (w, [0.0, 1.0, 2.0, 3.0], 6.0) for w in range(4)}


def test_nn_functional_all_gather_runs_torchs_own_backward():
    """loss_r = sum_k c[r][k] * sum(y_k): dL/dx_w = sum_r c[r][w], through torch's own
    _AllGather.backward (all_to_all on this backend), run by each rank's thread."""
    import torch.distributed.nn.functional as dnn

    c = torch.tensor([[1.0, 2.0, 3.0], [10.0, 20.0, 30.0], [100.0, 200.0, 300.0]], dtype=F64)

    def body(ctx):
        x = torch.full((2,), float(ctx.world_rank), dtype=F64, requires_grad=True)
        gathered = dnn.all_gather(x)
        assert type(gathered[0].grad_fn).__name__ == "_AllGatherBackward"
        sum(c[ctx.world_rank][k] * gathered[k].sum() for k in range(3)).backward()
        return x.grad.tolist()

    runtime = InProcessRuntime()
    got = run_ranks(body, world=3, dp=3, runtime=runtime)
    assert got == {w: [float(c[:, w].sum())] * 2 for w in range(3)}
    assert "pg.alltoall" in ops_of(runtime, 3)  # torch's backward, not a stand-in's


def test_functional_collectives_with_autograd():
    import torch.distributed._functional_collectives as fc

    def body(ctx):
        w = ctx.world_rank
        x = torch.full((1, 2), float(w + 1), dtype=F64, requires_grad=True)
        full = fc.all_gather_tensor(x.detach(), 0, dist.group.WORLD)
        summed = fc.all_reduce(torch.tensor([float(w)], dtype=F64), "sum", dist.group.WORLD)
        scattered = fc.reduce_scatter_tensor(torch.arange(4, dtype=F64) * (w + 1), "sum", 0,
                                             dist.group.WORLD)
        gathered = fc.all_gather_tensor_autograd(x, 0, dist.group.WORLD)
        (gathered[:, 0] * torch.arange(1, 5, dtype=F64) * (w + 1)).sum().backward()
        return (full[:, 0].tolist(), float(summed), scattered.tolist(), x.grad.tolist())

    got = run_ranks(body)
    # dL/dx_w[0] = sum_r (w + 1) * (r + 1), through the C++ backward's reduce_scatter
    assert got == {w: ([1.0, 2.0, 3.0, 4.0], 6.0, [10.0 * w], [[10.0 * (w + 1), 0.0]])
                   for w in range(4)}


def test_all_gather_into_tensor_and_reduce_scatter_tensor():
    def body(ctx):
        w = ctx.world_rank
        out = torch.zeros(8, dtype=F64)
        dist.all_gather_into_tensor(out, torch.tensor([w, 10.0 * w], dtype=F64))
        part = torch.zeros(2, dtype=F64)
        dist.reduce_scatter_tensor(part, torch.arange(8, dtype=F64) + w)
        return out.tolist(), part.tolist()

    got = run_ranks(body)
    gathered = [v for w in range(4) for v in (w, 10.0 * w)]
    assert got == {w: (gathered, [4.0 * 2 * w + 6, 4.0 * (2 * w + 1) + 6]) for w in range(4)}


def test_object_collectives():
    def body(ctx):
        w = ctx.world_rank
        objects = [None] * 4
        dist.all_gather_object(objects, {"rank": w, "tag": "x" * w})
        broadcast = [f"from {w}", w] if w == 2 else [None, None]
        dist.broadcast_object_list(broadcast, src=2)
        gathered = [None] * 4 if w == 1 else None
        dist.gather_object(("g", w), gathered, dst=1)
        return objects, broadcast, gathered

    got = run_ranks(body)
    everyone = [{"rank": w, "tag": "x" * w} for w in range(4)]
    for w in range(4):
        assert got[w][0] == everyone and got[w][1] == ["from 2", 2]
        assert got[w][2] == ([("g", r) for r in range(4)] if w == 1 else None)


def test_new_group_and_new_subgroups():
    def body(ctx):
        w = ctx.world_rank
        evens = dist.new_group([0, 2])
        mine, _ = dist.new_subgroups(group_size=2)  # {0, 1}, {2, 3}
        t = torch.tensor([float(w)], dtype=F64)
        dist.all_reduce(t, group=mine)
        e = torch.tensor([float(w)], dtype=F64)
        if w in (0, 2):
            dist.all_reduce(e, group=evens)
        return float(t), float(e), dist.get_process_group_ranks(mine)

    got = run_ranks(body)
    assert got == {0: (1.0, 2.0, [0, 1]), 1: (1.0, 1.0, [0, 1]),
                   2: (5.0, 2.0, [2, 3]), 3: (5.0, 3.0, [2, 3])}


def test_get_rank_and_world_size_with_groups():
    def body(ctx):
        odd = dist.new_group([1, 3])
        return (dist.get_rank(), dist.get_world_size(), dist.get_rank(ctx.dp_group),
                dist.get_world_size(ctx.dp_group), dist.get_rank(odd),
                dist.is_initialized(), dist.get_backend())

    got = run_ranks(body, world=4, dp=2)  # DP groups {0, 2}, {1, 3}
    assert got == {w: (w, 4, w // 2, 2, {1: 0, 3: 1}.get(w, -1), True, "infonce")
                   for w in range(4)}
    assert not dist.is_initialized()  # outside a case: the process's own (empty) state


def test_send_recv_isend_irecv_batch_isend_irecv():
    def body(ctx):
        w, right, left = ctx.world_rank, (ctx.world_rank + 1) % 4, (ctx.world_rank + 3) % 4
        got = torch.zeros(2, dtype=F64)
        if w % 2 == 0:  # blocking: evens send first, odds receive first
            dist.send(torch.tensor([w, 1.0], dtype=F64), right)
            dist.recv(got, left)
        else:
            dist.recv(got, left)
            dist.send(torch.tensor([w, 1.0], dtype=F64), right)
        late = torch.zeros(1, dtype=F64)
        pending = dist.irecv(late, left, tag=7)  # posted before the matching isend
        dist.isend(torch.tensor([100.0 + w], dtype=F64), right, tag=7).wait()
        pending.wait()
        batch = torch.zeros(1, dtype=F64)
        works = dist.batch_isend_irecv([
            dist.P2POp(dist.isend, torch.tensor([200.0 + w], dtype=F64), left),
            dist.P2POp(dist.irecv, batch, right)])
        for work in works:
            work.wait()
        return got.tolist(), float(late), float(batch)

    got = run_ranks(body)
    assert got == {w: ([float((w + 3) % 4), 1.0], 100.0 + (w + 3) % 4, 200.0 + (w + 1) % 4)
                   for w in range(4)}


def test_recv_never_sent_is_a_deadlock_not_a_hang():
    def body(ctx):
        if ctx.world_rank == 0:
            dist.recv(torch.zeros(1), 1)

    start = time.monotonic()
    with pytest.raises(DeadlockError, match=r"rank 0 in recv from rank 1 \(tag 0"):
        run_ranks(body, world=2, dp=2)
    assert time.monotonic() - start < 30


def test_recv_of_another_shape_is_a_named_error():
    def body(ctx):
        if ctx.world_rank == 0:
            dist.send(torch.zeros(3), 1)
        else:
            dist.recv(torch.zeros(2), 0)

    with pytest.raises(ShapeMismatch, match=r"recv from rank 0"):
        run_ranks(body, world=2, dp=2)


def test_barrier_waits_for_every_rank():
    arrived = []

    def body(ctx):
        arrived.append(ctx.world_rank)
        dist.barrier()
        return len(arrived)

    assert run_ranks(body) == {w: 4 for w in range(4)}


def test_ranks_calling_different_collectives_is_an_error():
    def body(ctx):
        if ctx.world_rank == 0:
            dist.barrier()
        else:
            dist.all_reduce(torch.zeros(1))

    with pytest.raises(RuntimeError_, match="collective mismatch"):
        run_ranks(body, world=2, dp=2)


def _agreement_cases():
    """Equal shards (all_gather needs one shape on every member); the DP group is the world
    (over a DP subgroup torch's gloo branch of _AlltoAll scatters with the group rank as
    the global source rank, see python/README.md)."""
    return [make_case(world=world, dp=world, steps=steps, negatives=(1,), seed=world + steps,
                      dtype=dtype)
            for world in (2, 3, 4) for steps in (1, 2) for dtype in ("float64", "float32")]


@pytest.mark.parametrize("factory", ["make_torch_nn", "make_functional"])
def test_torch_autograd_gather_agrees_with_real_gloo_ddp(factory):
    from infonce_sim.adapters import load_adapter
    from infonce_sim.runtime.ddp import DdpRuntime

    spec = {"kind": f"backend_adapters:{factory}"}
    adapter = load_adapter(spec)
    inprocess, ddp = InProcessRuntime(), DdpRuntime(spec, timeout=300, max_pools=1)
    worst = {"float64": 0.0, "float32": 0.0}
    try:
        for case in _agreement_cases():
            a, b = inprocess.run(adapter, case), ddp.run(adapter, case)
            for ga, gb in zip(a["grads"], b["grads"]):
                err = float((ga.double() - gb.double()).abs().max()) / max(
                    float(gb.abs().max()), 1.0)
                worst[case.dtype] = max(worst[case.dtype], err)
            for la, lb in zip(a["losses"], b["losses"]):
                worst[case.dtype] = max(worst[case.dtype], abs(la - lb) / max(abs(lb), 1.0))
            assert float(a["grads"][0].abs().max()) > 0  # the gather's backward reached the encoder
    finally:
        ddp.close()
    assert worst["float64"] <= 1e-12 and worst["float32"] <= 1e-5, worst


def _worker_session(args, requests):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "python"), str(HERE)]))
    proc = subprocess.run([sys.executable, "-m", "infonce_sim.worker", *args],
                          input="".join(json.dumps(r) + "\n" for r in requests),
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()[1:]  # after the handshake


def test_same_case_twice_gives_identical_response_bytes():
    obj = make_case(world=4, dp=2, steps=2, negatives=(1,), parse=False)
    requests = [{"id": 0, "case": obj}, {"id": 0, "case": obj}]
    first = _worker_session(["--adapter", "backend_adapters:make_functional"], requests)
    second = _worker_session(["--adapter", "backend_adapters:make_functional"], requests[:1])
    assert "error" not in first[0], first[0]
    assert first[0] == first[1] == second[0]


_UNIMPORTED = textwrap.dedent("""
    import json, sys, torch.distributed as dist
    from infonce_sim.adapters import load_adapter
    from infonce_sim.cases.case_families import parse_case
    assert not hasattr(dist, "nn"), "torch.distributed.nn imported before the adapter"
    spec = {"kind": "backend_adapters:make_unimported_nn"}
    case = parse_case(json.loads(sys.argv[2]))
    if sys.argv[1] == "inprocess":
        from infonce_sim.runtime.inprocess_runtime import InProcessRuntime as R
        runtime = R()
    else:
        from infonce_sim.runtime.ddp import DdpRuntime
        runtime = DdpRuntime(spec, timeout=120, max_pools=1)
    try:
        runtime.run(load_adapter(spec), case)
        print("no error")
    except Exception as e:
        print(f"{type(e).__name__}: {e}")
    finally:
        runtime.close()
""")


def _run_unimported(runtime):
    """In a fresh process: this pytest process has imported torch.distributed.nn."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "python"), str(HERE)]))
    case = json.dumps(make_case(world=2, dp=2, negatives=(1,), parse=False))
    proc = subprocess.run([sys.executable, "-c", _UNIMPORTED, runtime, case], capture_output=True,
                          text=True, env=env, timeout=600, cwd=HERE)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_missing_import_of_torch_distributed_nn_fails_in_process():
    """The runtime imports torch.distributed.nn for nobody: the trainer's bug shows."""
    out = _run_unimported("inprocess")
    assert "AttributeError: module 'torch.distributed' has no attribute 'nn'" in out, out


def test_under_real_ddp_torch_2_13_imports_torch_distributed_nn_itself():
    """Not the same as in-process: on torch 2.13, constructing DistributedDataParallel
    imports torch._dynamo, whose import chain (fsdp, _shard) imports
    torch.distributed.nn.functional, so by the time the loss runs the attribute exists
    and the trainer's missing import goes unnoticed under real DDP (python/README.md)."""
    assert _run_unimported("ddp").strip().endswith("no error")
