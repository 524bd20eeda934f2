"""Real DDP: W processes (spawn), gloo on 127.0.0.1, DistributedDataParallel, for fidelity.

The pool of a world size (its processes and their process groups: the default one,
DDP's own and the DP subgroups) is kept and reused across cases of that size; at most
`max_pools` world sizes are kept alive at once (the least recently used one is closed).
Every rank runs the same `rank_program` as the in-process runtime, with the
adapter's collectives fulfilled by torch.distributed, the model wrapped in
DistributedDataParallel (no_sync on every micro-step but the last), and the
`sum` reduction as a comm hook summing over the rank's DP group.
"""

import datetime
import faulthandler
import os
import queue
import random
import shutil
import socket
import sys
import tempfile
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as torch_mp
from torch.nn.parallel import DistributedDataParallel

from ..cases.spec import torch_dtype
from . import families
from .adapter_spec import load_adapter
from .rank_deaths import exit_description, fault_log_path, last_words, read_fault_log
from .rank import RankContext, drive, rank_program, seed_value


class PoolError(Exception):
    pass


def _free_loopback_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _sum_over_dp_group(group, bucket):
    """DDP comm hook for reduction "sum": sum over the rank's DP group, no averaging."""
    work = dist.all_reduce(bucket.buffer(), group=group, async_op=True)
    return work.get_future().then(lambda fut: fut.value()[0])


class RankGroups:
    """A rank's process groups beyond the default one: DDP's own (the world) and, made on
    first use, the DP groups of each DP size."""

    def __init__(self, world):
        self.world = world
        self.ddp = dist.new_group(ranks=list(range(world)))
        self.dp_cache = {}

    def dp_group(self, replicas_rank, dp):
        return dp_groups_for(self.world, dp, self.dp_cache)[replicas_rank]


def dp_groups_for(world, dp, cache):
    """DP group of replica r = {r, r+R, ...}; every rank creates every group, in order."""
    if dp not in cache:
        replicas = world // dp
        cache[dp] = [dist.new_group(ranks=[r + i * replicas for i in range(dp)])
                     for r in range(replicas)]
    return cache[dp]


_REDUCE = {"sum": "SUM", "max": "MAX", "min": "MIN", "product": "PRODUCT"}


def _fulfil(request):
    """A generator adapter's Collective, done with torch.distributed."""
    size = dist.get_world_size(request.group)
    if request.op == "all_gather_object":
        out = [None] * size
        dist.all_gather_object(out, request.payload, group=request.group)
        return out
    if request.op == "all_gather":
        out = [torch.empty_like(request.payload) for _ in range(size)]
        dist.all_gather(out, request.payload, group=request.group)
        return out
    dist.all_reduce(request.payload, op=getattr(dist.ReduceOp, _REDUCE[request.reduce_op]),
                    group=request.group)
    return request.payload


def _agree_on_failure(failed):
    """Every rank learns whether any rank failed, before DDP's backward collectives."""
    flag = torch.tensor([1 if failed else 0], dtype=torch.int64)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(int(flag))
    yield  # noqa: unreachable - makes this a generator for `yield from`


def wrap_and_seed(module, case, world_rank, group, ddp_group):
    """The rank's replica under DistributedDataParallel (a mean over the W ranks of
    `ddp_group`; a sum over the DP group `group` under a summing reduction), and the
    rank's generators seeded (`synced` or `per-rank`).

    DDP reduces on a group of its own, never on the default group that adapters gather on
    (open_clip's functional all_gather, whose backward reduce-scatters in the same backward
    as DDP's bucket hooks): each group has its own gloo connections and worker threads, so
    the two kinds of traffic cannot meet in one. (A rank died in gloo's network thread,
    SIGSEGV, in 2 of 4 CI runs with the two on one group; not reproduced locally, in 1,650
    looped cases either way, so this isolates it rather than proves a cause.)"""
    model = DistributedDataParallel(module, process_group=ddp_group)
    if case.reduction == "sum":
        model.register_comm_hook(group, _sum_over_dp_group)
    seed = seed_value(case, world_rank)
    np.random.seed(seed % 2**32)
    torch.default_generator.manual_seed(seed)
    random.seed(seed)
    return model


def rank_step(adapter, case, world_rank, groups, replays_draws):
    """One data-parallel step on this rank under DDP; returns its report."""
    if families.of(case) is not None:  # a strategy, a learnable temperature, CLIP
        return ddp_rank_step(adapter, case, world_rank, groups, replays_draws)
    dtype = torch.float64 if case.dtype == "float64" else torch.float32
    replica = world_rank % case.replicas
    group = groups.dp_group(replica, case.dp)
    module = torch.nn.Linear(len(case.weight[0]), len(case.weight), bias=False).to(dtype)
    with torch.no_grad():
        module.weight.copy_(torch.tensor(case.weight, dtype=dtype))
    model = wrap_and_seed(module, case, world_rank, group, groups.ddp)
    ctx = RankContext(case, world_rank, model, group, replays_draws)
    ctx.sync_context = lambda last: model.no_sync() if not last else _null()
    reported = drive(rank_program(adapter, ctx, agree_on_failure=_agree_on_failure), _fulfil)
    if module.weight.grad is None:
        raise PoolError("the encoder weight received no gradient")
    return {"loss": reported, "grad": module.weight.grad.to(torch.float64).tolist(),
            "draws": ctx.draws}


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _worker_main(world_rank, world, port, adapter_spec, tasks, results, fault_log):
    # A fatal signal (SIGSEGV, SIGABRT in c10d/gloo) leaves this rank's Python stack in
    # fault_log for the parent to quote (rank_deaths.py); the file stays open until exit.
    fault_file = open(fault_log, "w", encoding="utf-8")  # noqa: SIM115
    faulthandler.enable(file=fault_file, all_threads=True)
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    torch.set_num_threads(1)
    try:
        adapter = load_adapter(adapter_spec)
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=world_rank,
                                world_size=world, timeout=datetime.timedelta(seconds=120))
        groups = RankGroups(world)
    except Exception as e:  # reported to the parent, which retries on another port
        results.put(("fatal", world_rank, None, f"{type(e).__name__}: {e}"))
        return
    results.put(("ready", world_rank, None, None))
    while True:
        task = tasks.get()
        if task is None:
            break
        case_id, case, replays_draws = task
        try:
            report = rank_step(adapter, case, world_rank, groups, replays_draws)
        except Exception as e:  # noqa: BLE001 - the step's error, reported per rank
            report = {"error": f"{type(e).__name__}: {e}"}
        results.put(("result", world_rank, case_id, report))
    dist.destroy_process_group()


class RankPool:
    """W spawned processes forming one gloo world; runs one case at a time."""

    def __init__(self, world, adapter_spec, timeout):
        self.world = world
        self.timeout = timeout
        context = torch_mp.get_context("spawn")
        self.results = context.Queue()
        self.tasks = [context.Queue() for _ in range(world)]
        self.fault_dir = tempfile.mkdtemp(prefix="infonce-sim-ranks-")
        self.echoed = set()  # ranks whose faulthandler output went to stderr already
        port = _free_loopback_port()
        self.procs = [
            context.Process(target=_worker_main,
                            args=(w, world, port, adapter_spec, self.tasks[w], self.results,
                                  fault_log_path(self.fault_dir, w)),
                            daemon=True) for w in range(world)
        ]
        for p in self.procs:
            p.start()
        try:
            ready = self._collect("ready", None)
        except PoolError:
            self.close()
            raise
        failures = [msg for msg in ready.values() if msg is not None]
        if failures:
            self.close()
            raise PoolError(f"world {world}: {failures[0]}")

    def _collect(self, kind, case_id):
        got = {}
        deadline = time.monotonic() + self.timeout
        while len(got) < self.world:
            try:
                tag, rank, cid, payload = self.results.get(timeout=1.0)
            except queue.Empty:
                if time.monotonic() > deadline:
                    raise PoolError(f"world {self.world}: timed out after {self.timeout} s")
                if any(not p.is_alive() for p in self.procs):
                    raise PoolError(self._death_report(case_id))
                continue
            if tag == "fatal":
                got[rank] = payload
            elif tag == kind and cid == case_id:
                got[rank] = payload if tag == "result" else None
        return got

    def _death_report(self, case_id):
        """One line: which ranks died, how, when, and the first one's faulthandler gist
        (its whole faulthandler output goes to stderr)."""
        dead = [w for w, p in enumerate(self.procs) if not p.is_alive()]
        for w in dead:
            self.procs[w].join(timeout=1)  # its exit code is known once it is reaped
        how = ", ".join(f"rank {w} died ({exit_description(self.procs[w].exitcode)})"
                        for w in dead)
        when = "while starting" if case_id is None else f"during case {case_id}"
        text = self._echo_fault_log(dead[0])
        words = last_words(text)
        return f"world {self.world}: {how} {when}" + (f"; rank {dead[0]}: {words}" if words
                                                       else "")

    def _echo_fault_log(self, rank):
        """The rank's faulthandler output (once), copied to stderr so that a log keeps it."""
        text = read_fault_log(fault_log_path(self.fault_dir, rank))
        if text and rank not in self.echoed:
            self.echoed.add(rank)
            print(f"infonce-sim: rank {rank} of world {self.world}: faulthandler:\n{text}",
                  file=sys.stderr, flush=True)
        return text

    def run(self, case_id, case, replays_draws):
        for q in self.tasks:
            q.put((case_id, case, replays_draws))
        return self._collect("result", case_id)

    def close(self):
        # A rank that died leaves the others blocked in a collective: no clean exit to wait for
        wait = 0 if any(not p.is_alive() for p in self.procs) else 10
        for q, p in zip(self.tasks, self.procs):
            if p.is_alive():
                q.put(None)
        for p in self.procs:
            p.join(timeout=wait)
        for p in self.procs:
            if p.is_alive():
                p.terminate()
                p.join(timeout=5)
        for w in range(self.world):  # a crash while closing is not lost with the files
            self._echo_fault_log(w)
        shutil.rmtree(self.fault_dir, ignore_errors=True)


class DdpRuntime:
    """Runs cases under real DDP; keeps a RankPool per world size (at most max_pools)."""

    name = "real DDP (gloo)"

    def __init__(self, adapter_spec, timeout=300.0, max_pools=4):
        self.adapter_spec = adapter_spec
        self.timeout = timeout
        self.max_pools = max_pools
        self.pools = {}  # world -> RankPool, least recently used first
        self.spawn_seconds = 0.0
        self.case_id = 0

    def pool(self, world):
        if world in self.pools:
            self.pools[world] = self.pools.pop(world)  # most recently used last
            return self.pools[world]
        while len(self.pools) >= self.max_pools:
            self.discard(next(iter(self.pools)))
        start = time.monotonic()
        for attempt in range(3):
            try:
                self.pools[world] = RankPool(world, self.adapter_spec, self.timeout)
                break
            except PoolError:
                if attempt == 2:
                    raise
        self.spawn_seconds += time.monotonic() - start
        return self.pools[world]

    def discard(self, world):
        pool = self.pools.pop(world, None)
        if pool:
            pool.close()

    def run(self, adapter, case, replays_draws=True):
        """{losses, grad, grads, padding_draws} of one case (raises PoolError on a failed step).

        `adapter` is unused here: every rank process loads its own from the spec.
        """
        self.case_id += 1
        pool = self.pool(case.world)
        try:
            reports = pool.run(self.case_id, case, replays_draws)
        except PoolError:
            self.discard(case.world)
            raise
        errors = [reports[w]["error"] for w in range(case.world) if "error" in reports[w]]
        if errors:
            raise PoolError(errors[0])
        if families.of(case) is not None:
            return ddp_result(case, reports)
        grads = [torch.tensor(reports[w]["grad"], dtype=torch.float64) for w in range(case.world)]
        return {
            "losses": [reports[w]["loss"] for w in range(case.world)],
            "grad": grads[0],
            "grads": grads,
            "padding_draws": [[reports[w]["draws"][m] for w in range(case.world)]
                              for m in range(case.steps)],
        }

    def close(self):
        for world in list(self.pools):
            self.discard(world)


# --------------------------------------------------------------------------------------
# Real DDP (one rank's step in its process)
# --------------------------------------------------------------------------------------


def ddp_rank_step(adapter, case, world_rank, groups, replays_draws):
    """rank_step for a case of families.py: the replica under DistributedDataParallel."""
    dtype = torch_dtype(case)
    replica = world_rank % case.replicas
    group = groups.dp_group(replica, case.dp)
    if case.family in families.TWO_TOWERS:
        module, encoders, direct = families.two_tower_replica(case, dtype)
    else:
        module = torch.nn.Linear(len(case.weight[0]), len(case.weight), bias=False).to(dtype)
        with torch.no_grad():
            module.weight.copy_(torch.tensor(case.weight, dtype=dtype))
        encoders = {"weight": module.weight}
        direct = {}
        if case.learnable_temperature:
            module.inverse_temperature = families.inverse_temperature_parameter(case, dtype)
            direct = {"inverse_temperature": module.inverse_temperature}
    model = wrap_and_seed(module, case, world_rank, group, groups.ddp)
    ctx = families.context_class(case)(case, world_rank, model, group, replays_draws, None,
                                       encoders, direct)
    ctx.sync_context = lambda last: model.no_sync() if not last else _null()
    ctx.autograd_gather = families.ddp_autograd_gather
    reported = drive(families.family_rank_program(adapter, ctx,
                                                  agree_on_failure=_agree_on_failure),
                     _fulfil)
    grads = {}
    for name, p in {**encoders, **direct}.items():
        if p.grad is None:
            raise PoolError(f"the parameter {name} received no gradient")
        grads[name] = p.grad.to(torch.float64).tolist()
    return {"loss": reported, "grads_by_name": grads, "draws": ctx.draws}


def ddp_result(case, reports):
    """DdpRuntime.run's result from every rank's ddp_rank_step report."""
    per_rank = [{name: torch.tensor(g, dtype=torch.float64)
                 for name, g in reports[w]["grads_by_name"].items()} for w in range(case.world)]
    out = families.result_of(case, [reports[w]["loss"] for w in range(case.world)], per_rank, None)
    if case.family == "infonce":
        out["padding_draws"] = [[reports[w]["draws"][m] for w in range(case.world)]
                                for m in range(case.steps)]
    return out
