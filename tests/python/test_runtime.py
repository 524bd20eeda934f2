"""The in-process runtime: determinism, per-rank random state, thread mode's
torch.distributed (autograd all_gather, accelerate-style gather_object, DP groups), gradient
accumulation and the DDP reduction, failures."""

import random

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.distributed.nn

from infonce_sim.adapters.conformance import ConformanceAdapter
from infonce_sim.cases.case_families import parse_case
from infonce_sim.runtime.inprocess import RuntimeError_
from infonce_sim.runtime.inprocess_runtime import InProcessRuntime
from infonce_sim.runtime.standin import gather_object


def make_case(world=4, dp=2, steps=1, hard=None, rng_mode="synced", seed=5, features=3, dim=2,
              groups=2, negatives=(1, 2), use_batch=True, reduction="mean", padding="fixed",
              dtype="float64", parse=True):
    """A case (parsed, or its JSON object with parse=False)."""
    data = np.random.RandomState(1234)  # test inputs only
    batches = [[[[data.uniform(-1, 1, features).tolist()
                  for _ in range(2 + negatives[(g + d + m) % len(negatives)])]
                 for g in range(groups)] for d in range(dp)] for m in range(steps)]
    obj = {
        "format": "infonce-case/1", "mesh": {"world": world, "dp": dp}, "dtype": dtype,
        "reduction": reduction, "gather": "object", "compensate": True,
        "loss": {"temperature": 0.1, "use_batch": use_batch, "hard_negatives": hard,
                 "padding": padding, "mask_fake_negative": False, "fake_neg_margin": 0.1,
                 "include_qq": False, "include_dd": False},
        "encoder": {"normalize": True, "weight": data.uniform(-1, 1, (dim, features)).tolist()},
        "accumulation": {"steps": steps, "normalize": True},
        "rng": {"mode": rng_mode, "seed": seed},
        "batches": batches}
    return parse_case(obj) if parse else obj


class ThreadAdapter:
    """A plain-function adapter (thread mode) running `body(ctx, embeddings, labels)`."""

    name = "test"
    supports = {}

    def __init__(self, body):
        self.body = body

    def loss(self, ctx, embeddings, labels):
        return self.body(ctx, embeddings, labels)


def as_bits(result):
    return ([torch.tensor(x).double().numpy().tobytes() for x in result["losses"]],
            [g.numpy().tobytes() for g in result["grads"]], result["padding_draws"])


@pytest.mark.parametrize("rng_mode", ["synced", "per-rank"])
def test_same_inputs_same_bits(rng_mode):
    """Hard negatives drawn by the ranks' own generators: two runtimes, two runs each."""
    case = make_case(world=4, dp=2, steps=2, hard=3, rng_mode=rng_mode)
    runs = []
    for _ in range(2):
        runtime = InProcessRuntime()
        runs += [as_bits(runtime.run(ConformanceAdapter(), case, replays_draws=False))
                 for _ in range(2)]
        runtime.close()
    assert all(r == runs[0] for r in runs[1:])
    draws = runs[0][2]
    assert any(d for micro in draws for d in micro), "the case must draw padding"
    if rng_mode == "synced":  # every rank's generator starts from one seed
        assert all(micro[w] == micro[0] for micro in draws for w in range(4))
    else:
        assert any(micro[w] != micro[0] for micro in draws for w in range(4))


def test_thread_adapter_same_bits_as_generator_adapter():
    """The conformance loss run through blocking collectives gives the generator mode's bits."""
    case = make_case(world=4, dp=2, steps=2, hard=3)
    generator_mode = InProcessRuntime().run(ConformanceAdapter(), case)
    from infonce_sim.cases.spec import compensation_scale, infonce_loss

    def body(ctx, embeddings, labels):
        slots = [None] * ctx.dp
        dist.all_gather_object(slots, embeddings.detach(), group=ctx.dp_group)
        all_labels = [None] * ctx.dp
        dist.all_gather_object(all_labels, labels, group=ctx.dp_group)
        slots[ctx.dp_rank] = embeddings
        loss = infonce_loss(torch.cat(slots), torch.cat(all_labels), ctx.case.loss,
                            ctx.padding_stream())
        s = compensation_scale(ctx.case)
        return loss * s - loss.detach() * (s - 1)

    thread_mode = InProcessRuntime().run(ThreadAdapter(body), case)
    assert as_bits(thread_mode) == as_bits(generator_mode)


def test_random_state_is_per_rank_and_survives_switches():
    """Each rank draws from numpy, torch and random between collectives; values are what a
    fresh generator seeded as the rng mode says would give (seed, or seed + world rank)."""
    seen = {}

    def body(ctx, embeddings, labels):
        values = []
        for _ in range(3):
            values.append((float(np.random.rand()), float(torch.rand(1)), random.random(),
                           float(np.random.normal())))  # normal: the legacy Gaussian cache
            dist.barrier()  # every rank runs in between
        seen[ctx.world_rank] = values
        return embeddings.sum() * 0

    for mode in ("synced", "per-rank"):
        seen.clear()
        InProcessRuntime().run(ThreadAdapter(body), make_case(world=3, dp=3, rng_mode=mode, seed=9))
        for w in range(3):
            seed = 9 if mode == "synced" else 9 + w
            np_gen, torch_gen, py_gen = (np.random.RandomState(seed),
                                         torch.Generator().manual_seed(seed), random.Random(seed))
            want = [(float(np_gen.rand()), float(torch.rand(1, generator=torch_gen)),
                     py_gen.random(), float(np_gen.normal())) for _ in range(3)]
            assert seen[w] == want, (mode, w)


def test_cached_gaussians_are_per_rank():
    """A Gaussian cached by one draw and used by the next (numpy's legacy generator, Python's
    random.gauss, torch's scalar normal) stays the rank's across switches: a draw that only
    uses the cache changes no generator word."""
    seen = {}

    def body(ctx, embeddings, labels):
        values = []
        for _ in range(4):
            values.append((float(np.random.normal()), random.gauss(0.0, 1.0),
                           float(torch.randn(()))))
            dist.barrier()
        seen[ctx.world_rank] = values
        return embeddings.sum() * 0

    for mode in ("synced", "per-rank"):
        seen.clear()
        InProcessRuntime().run(ThreadAdapter(body), make_case(world=3, dp=3, rng_mode=mode, seed=4))
        for w in range(3):
            seed = 4 if mode == "synced" else 4 + w
            np_gen, torch_gen, py_gen = (np.random.RandomState(seed),
                                         torch.Generator().manual_seed(seed), random.Random(seed))
            want = [(float(np_gen.normal()), py_gen.gauss(0.0, 1.0),
                     float(torch.randn((), generator=torch_gen))) for _ in range(4)]
            assert seen[w] == want, (mode, w)


def test_autograd_all_gather_backward_is_reduce_scatter_sum():
    """y = all_gather(x) on every rank (x_w a leaf of rank w), rank r's loss
    sum_k c[r][k] * sum(y_k): the gradient of x_w is sum over r of c[r][w]."""
    c = torch.tensor([[1.0, 2.0, 3.0], [10.0, 20.0, 30.0], [100.0, 200.0, 300.0]],
                     dtype=torch.float64)

    grads = {}

    def body_leaf(ctx, embeddings, labels):
        x = torch.full((2,), float(ctx.world_rank), dtype=torch.float64, requires_grad=True)
        gathered = torch.distributed.nn.all_gather(x)
        assert [g.tolist() for g in gathered] == [[0.0] * 2, [1.0] * 2, [2.0] * 2]
        loss = sum(c[ctx.world_rank][k] * gathered[k].sum() for k in range(3))
        loss.backward()
        grads[ctx.world_rank] = x.grad.tolist()
        return embeddings.sum() * 0

    InProcessRuntime().run(ThreadAdapter(body_leaf), make_case(world=3, dp=3))
    assert grads == {w: [float(c[:, w].sum())] * 2 for w in range(3)}


def test_gather_object_flattens_one_level_and_cuts_the_graph():
    got = {}

    def body(ctx, embeddings, labels):
        got[ctx.world_rank] = gather_object([ctx.world_rank, 10 * ctx.world_rank])
        mine = embeddings[:1]
        out = [None] * dist.get_world_size()
        dist.all_gather_object(out, mine)
        assert all(t.grad_fn is None and t.requires_grad for t in out)
        assert out[ctx.world_rank] is not mine and torch.equal(out[ctx.world_rank], mine)
        return embeddings.sum() * 0

    InProcessRuntime().run(ThreadAdapter(body), make_case(world=3, dp=3))
    assert got == {w: [0, 0, 1, 10, 2, 20] for w in range(3)}


def test_dp_groups_and_all_reduce():
    seen = {}

    def body(ctx, embeddings, labels):
        group = ctx.dp_group
        t = torch.tensor([float(ctx.world_rank)])
        dist.all_reduce(t, group=group)
        m = torch.tensor([float(ctx.world_rank)])
        dist.all_reduce(m, op=dist.ReduceOp.MAX)
        # every rank creates every DP group, in order, as torch requires (a new group
        # each time, as real torch.distributed gives; its ranks are the DP group's)
        again = [dist.new_group([r + i * ctx.replicas for i in range(ctx.dp)])
                 for r in range(ctx.replicas)][ctx.replica]
        seen[ctx.world_rank] = (dist.get_rank(), dist.get_world_size(), dist.get_rank(group),
                                dist.get_world_size(group), float(t), float(m),
                                    dist.get_process_group_ranks(again)
                                    == dist.get_process_group_ranks(group))
        return embeddings.sum() * 0

    InProcessRuntime().run(ThreadAdapter(body), make_case(world=6, dp=3))  # R = 2
    for w in range(6):  # DP group of replica r: {r, r + 2, r + 4}
        r = w % 2
        assert seen[w] == (w, 6, w // 2, 3, float(r + (r + 2) + (r + 4)), 5.0, True)


def test_accumulation_sends_nothing_before_the_last_micro_step():
    """Between micro-steps a rank's gradient is its own local sum (no reduction yet);
    after the step every rank holds the mean of the ranks' local gradients."""
    local = {}

    def body(ctx, embeddings, labels):
        if ctx.micro > 0:
            local.setdefault(ctx.world_rank, []).append(ctx.model.weight.grad.clone())
        return (embeddings * (ctx.world_rank + 1)).sum()

    case = make_case(world=2, dp=2, steps=3)
    result = InProcessRuntime().run(ThreadAdapter(body), case)
    assert not torch.equal(local[0][0], local[1][0])  # rank 1's loss is twice rank 0's weight
    assert all(torch.equal(g, result["grads"][0]) for g in result["grads"])


def test_reduction_sum_is_over_each_dp_group():
    def body(ctx, embeddings, labels):
        return embeddings.sum() * (ctx.world_rank + 1)

    runtime = InProcessRuntime()
    mean = runtime.run(ThreadAdapter(body), make_case(world=4, dp=2))
    total = runtime.run(ThreadAdapter(body), make_case(world=4, dp=2, reduction="sum"))
    # local gradient of rank w = (w + 1) G_shard(w // 2); DP groups {0, 2} and {1, 3}
    g_mean = mean["grad"]
    assert torch.allclose(total["grads"][0] + total["grads"][1], g_mean * 4, rtol=1e-13)
    assert not torch.equal(total["grads"][0], total["grads"][1])


def test_deadlock_and_mismatch_are_errors_and_the_runtime_recovers():
    runtime = InProcessRuntime()

    def deadlock(ctx, embeddings, labels):
        if ctx.world_rank == 0:
            dist.barrier()
        return embeddings.sum()

    with pytest.raises(RuntimeError_, match="deadlock"):
        runtime.run(ThreadAdapter(deadlock), make_case(world=2, dp=2))

    def mismatch(ctx, embeddings, labels):
        if ctx.world_rank == 0:
            dist.barrier()
        else:
            dist.all_reduce(torch.zeros(1))
        return embeddings.sum()

    with pytest.raises(RuntimeError_, match="collective mismatch"):
        runtime.run(ThreadAdapter(mismatch), make_case(world=2, dp=2))

    def fails(ctx, embeddings, labels):
        dist.barrier()
        if ctx.world_rank == 1:
            raise ValueError("rank 1 broke")
        dist.barrier()
        return embeddings.sum()

    with pytest.raises(ValueError, match="rank 1 broke"):
        runtime.run(ThreadAdapter(fails), make_case(world=3, dp=3))
    ok = runtime.run(ThreadAdapter(lambda ctx, e, l: e.sum()), make_case(world=3, dp=3))
    assert len(ok["losses"]) == 3
