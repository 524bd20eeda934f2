"""A torch.distributed backend for the in-process runtime's thread mode.

Each virtual rank runs on its own thread (inprocess.World's baton: one thread at a time,
fixed order). This module makes torch.distributed itself answer for that rank, so a
trainer's code runs unchanged however it reaches torch.distributed: names bound at import
(`from torch.distributed import all_gather`), torch.distributed.nn's autograd functions
(their own backward), the functional collectives (`_functional_collectives`, resolved by
group name in C++), object collectives, groups, point-to-point.

How torch accepts it (learnt from torch's own multi-threaded test process group, not
copied):
  * `InProcessGroup` is a Python subclass of `torch.distributed.ProcessGroup`, created by
    the backend "infonce" (`Backend.register_backend`, extended API: the creator learns the
    group's global ranks). torch's Python functions call its methods directly; C++ callers
    (the functional collectives) reach them through torch's ProcessGroup trampoline;
  * torch keeps its process-group state in `distributed_c10d._world`. While a case runs,
    that object is `_ThreadWorlds`: every attribute read or write goes to the calling
    thread's own `_RankState`, so each rank thread has its own default group
    (`init_process_group`, once per thread) and its own groups (`new_group`);
  * C++'s group registry (names -> groups, what the functional collectives resolve) is made
    per thread with `_set_thread_isolation_mode(True)` for the same reason.

Every collective deposits into the World's slots (inprocess.World.collective_blocking):
the last member to arrive completes it, and every member computes its result from the
same payloads in group-rank order, so reductions are in rank order and the bits do not
depend on anything but the inputs. Collectives complete before the call returns (async
work is already done; `wait()` returns at once), except `irecv`, whose wait receives.
Point-to-point sends are buffered (a send never blocks); a receive takes the k-th message
of its (source, destination, tag) channel; one that can never be satisfied is a deadlock,
reported by the scheduler (inprocess.DeadlockError), never a hang.

What no backend can serve stays a stand-in, listed here and in python/README.md:
  * `standin.gather_object`: accelerate.utils.gather_object for adapters' import
    stand-ins (it is accelerate's, not torch's: it only calls torch.distributed).
Nothing of torch.distributed is monkeypatched any more. Not served: `recv` from any
source (`src=None`), and collectives on non-CPU tensors.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Callable, Iterator, Sequence

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d
from torch._C._distributed_c10d import _set_thread_isolation_mode

from .inprocess import Group, RuntimeError_, World

BACKEND = "infonce"


class ShapeMismatch(RuntimeError_):
    """Members of one collective (or a send and its recv) passed tensors that do not fit."""


class UnsupportedOperation(RuntimeError_):
    """A torch.distributed call the in-process backend cannot serve."""


# -- per-thread torch state ------------------------------------------------------------------


class _RankState:
    """What torch's `_World` holds, for one rank thread (its default group, its groups)."""

    def __init__(self) -> None:
        self.default_pg = None
        self.pg_map: dict = {}
        self.pg_names: dict = {}
        self.pg_group_ranks: dict = {}
        self.pg_backend_config: dict = {}
        self.group_count = 0
        self.tags_to_pg: dict = {}
        self.pg_to_tag: dict = {}
        self.pg_coalesce_state: dict = {}
        self.comms: list = []


class _ThreadWorlds:
    """Stands in for `distributed_c10d._world`: the calling thread's _RankState, or (on a
    thread that is no rank, e.g. the main thread) the world that was there before."""

    def __init__(self, fallback: Any) -> None:
        object.__setattr__(self, "_fallback", fallback)

    def _state(self) -> Any:
        return getattr(_thread, "state", None) or self._fallback

    def __getattr__(self, name: str) -> Any:
        return getattr(self._state(), name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._state(), name, value)


_thread = threading.local()  # on a rank thread: .state, .world, .rank, .dp_groups
_proxy: _ThreadWorlds | None = None
_registered = False


def _register() -> None:
    global _registered
    if not _registered:
        dist.Backend.register_backend(BACKEND, _create_group, extended_api=True,
                                      devices=["cpu"])
        _registered = True


def _create_group(options: Any, _backend_options: Any) -> "InProcessGroup":
    """The backend's creator, called by torch on the rank thread that creates a group."""
    world: World = _thread.world
    ranks = list(options.global_ranks_in_group) or list(range(world.world))
    return InProcessGroup(world, world.group(ranks), options.group_rank)


@contextlib.contextmanager
def installed(world: World) -> Iterator[None]:
    """For the duration of a case: torch.distributed's state is per rank thread."""
    global _proxy
    _register()
    saved = c10d._world
    if _proxy is None or saved is not _proxy:
        _proxy = _ThreadWorlds(saved)
    c10d._world = _proxy
    _set_thread_isolation_mode(True)
    try:
        yield
    finally:
        _set_thread_isolation_mode(False)
        c10d._world = saved


def bind_rank(world: World, world_rank: int) -> None:
    """On a rank thread, before its program: its default group (once per thread)."""
    if getattr(_thread, "world", None) is world:
        return
    _thread.state = _RankState()
    _thread.world, _thread.rank, _thread.dp_groups = world, world_rank, {}
    dist.init_process_group(BACKEND, store=dist.HashStore(), rank=world_rank,
                            world_size=world.world)


def dp_group(world: World, dp: int, replica: int) -> dist.ProcessGroup:
    """The torch group of a DP group; as under real DDP (ddp.dp_groups_for), every rank
    creates every replica's group, in replica order, so group names agree across ranks."""
    groups = _thread.dp_groups.get(dp)
    if groups is None:
        replicas = world.world // dp
        groups = _thread.dp_groups[dp] = [
            dist.new_group(ranks=[r + i * replicas for i in range(dp)])
            for r in range(replicas)]
    return groups[replica]


# -- work -------------------------------------------------------------------------------------


class _Done(dist.Work):
    """A collective that completed when its call returned."""

    def __init__(self, result: Any = None) -> None:
        super().__init__()
        self._result = result

    def wait(self, timeout: Any = None) -> bool:
        return True

    def is_completed(self) -> bool:
        return True

    def is_success(self) -> bool:
        return True

    def get_future(self) -> torch.futures.Future:
        future: torch.futures.Future = torch.futures.Future()
        future.set_result(self._result)
        return future


class _PendingRecv(_Done):
    """irecv: the receive happens in wait() (the matching send may come later)."""

    def __init__(self, receive: Callable[[], None], source: int) -> None:
        super().__init__()
        self._receive: Callable[[], None] | None = receive
        self._source = source

    def wait(self, timeout: Any = None) -> bool:
        if self._receive is not None:
            receive, self._receive = self._receive, None
            receive()
        return True

    def is_completed(self) -> bool:
        return self._receive is None

    def _source_rank(self) -> int:
        return self._source


# -- reductions -------------------------------------------------------------------------------

_OPS = ("SUM", "AVG", "PRODUCT", "MIN", "MAX")


def _op_name(op: Any) -> str:
    for name in _OPS:
        if op == getattr(dist.ReduceOp, name):
            return name
    raise UnsupportedOperation(f"reduce op {op} is not supported in-process")


def _reduce(tensors: Sequence[torch.Tensor], op: str) -> torch.Tensor:
    """In group-rank order, whoever computes it: every member gets the same bits."""
    out = tensors[0].clone()
    for t in tensors[1:]:
        if op in ("SUM", "AVG"):
            out.add_(t)
        elif op == "PRODUCT":
            out.mul_(t)
        elif op == "MIN":
            torch.minimum(out, t, out=out)
        else:
            torch.maximum(out, t, out=out)
    if op == "AVG":
        out = out / len(tensors) if out.is_floating_point() else out // len(tensors)
    return out


def _snapshot(tensor: torch.Tensor) -> torch.Tensor:
    """A member's contribution: a copy, so the owner may overwrite its tensor afterwards."""
    return tensor.detach().clone()


def _check_same(what: str, shapes: Sequence[Any]) -> None:
    if len(set(shapes)) != 1:
        raise ShapeMismatch(f"{what}: members passed tensors of different shapes/dtypes "
                            f"{list(shapes)}")


def _signature(t: torch.Tensor) -> tuple:
    return (tuple(t.shape), str(t.dtype))


def _write(out: torch.Tensor, value: torch.Tensor, what: str) -> None:
    if out.numel() != value.numel() or out.dtype != value.dtype:
        raise ShapeMismatch(f"{what}: output {list(out.shape)} {out.dtype} cannot hold "
                            f"{list(value.shape)} {value.dtype}")
    with torch.no_grad():  # collectives write outputs in place, outside autograd (as c10d)
        out.copy_(value.reshape(out.shape))


# -- the process group ------------------------------------------------------------------------


class InProcessGroup(dist.ProcessGroup):
    """One rank's handle on a group of the in-process World; every op is a World slot."""

    def __init__(self, world: World, group: Group, group_rank: int) -> None:
        super().__init__(group_rank, group.size())
        self.sim_world = world
        self.sim_group = group
        self.member = group_rank

    def getBackendName(self) -> str:  # noqa: N802 - torch's name
        return BACKEND

    @property
    def group_name(self) -> str:
        """The name torch registered the group under (the functional collectives resolve
        groups by name). C++'s getter reads it from a registered C++ backend, which a
        Python group has none of; torch keeps it in its world's pg_names too."""
        return c10d._world.pg_names[self]

    def __repr__(self) -> str:
        return f"InProcessGroup(ranks={self.sim_group.ranks}, rank={self.member})"

    def _exchange(self, op: str, payload: Any, detail: str = "sum") -> list:
        """Deposit this member's payload; every member's, in group-rank order."""
        return self.sim_world.collective_blocking("pg." + op, self.sim_group, payload, detail)

    # reductions

    def allreduce(self, tensors: list, opts: Any = None) -> dist.Work:
        op = _op_name(opts.reduceOp) if opts is not None else "SUM"
        parts = self._exchange("allreduce", [_snapshot(t) for t in tensors], op)
        _check_same("all_reduce", [tuple(_signature(t) for t in p) for p in parts])
        for i, t in enumerate(tensors):
            _write(t, _reduce([p[i] for p in parts], op), "all_reduce")
        return _Done(tensors)

    def allreduce_coalesced(self, tensors: list, opts: Any = None) -> dist.Work:
        return self.allreduce(tensors, opts)

    def reduce(self, tensors: list, opts: Any) -> dist.Work:
        op, root = _op_name(opts.reduceOp), opts.rootRank
        parts = self._exchange(f"reduce(root={root})", [_snapshot(t) for t in tensors], op)
        if self.member == root:
            for i, t in enumerate(tensors):
                _write(t, _reduce([p[i] for p in parts], op), "reduce")
        return _Done(tensors)

    def reduce_scatter(self, outputs: list, input_lists: list, opts: Any = None) -> dist.Work:
        op = _op_name(opts.reduceOp) if opts is not None else "SUM"
        payload = [[_snapshot(t) for t in inputs] for inputs in input_lists]
        parts = self._exchange("reduce_scatter", payload, op)
        for i, out in enumerate(outputs):
            mine = [p[i][self.member] for p in parts]
            _check_same("reduce_scatter", [_signature(t) for t in mine])
            _write(out, _reduce(mine, op), "reduce_scatter")
        return _Done(outputs)

    def reduce_scatter_single(self, output: torch.Tensor, input: torch.Tensor,
                              opts: Any = None) -> dist.Work:
        return self.reduce_scatter_single_coalesced([output], [input], opts)

    def reduce_scatter_single_coalesced(self, outputs: list, inputs: list,
                                        opts: Any = None) -> dist.Work:
        """reduce_scatter_tensor (and the functional collectives' reduce_scatter_tensor):
        each input is `size` equal chunks along dim 0; member i gets chunk i, reduced."""
        op = _op_name(opts.reduceOp) if opts is not None else "SUM"
        parts = self._exchange("reduce_scatter_tensor", [_snapshot(t) for t in inputs], op)
        size = self.size()
        for i, out in enumerate(outputs):
            _check_same("reduce_scatter_tensor", [_signature(p[i]) for p in parts])
            if parts[0][i].numel() != out.numel() * size:
                raise ShapeMismatch(f"reduce_scatter_tensor: input of {parts[0][i].numel()} "
                                    f"elements for {size} outputs of {out.numel()}")
            chunks = [p[i].reshape(size, -1)[self.member] for p in parts]
            _write(out, _reduce(chunks, op), "reduce_scatter_tensor")
        return _Done(outputs)

    reduce_scatter_tensor_coalesced = reduce_scatter_single_coalesced

    # gathers

    def allgather(self, output_lists: list, inputs: list, opts: Any = None) -> dist.Work:
        parts = self._exchange("allgather", [_snapshot(t) for t in inputs])
        for i, outs in enumerate(output_lists):
            _check_same("all_gather", [_signature(p[i]) for p in parts])
            if len(outs) != len(parts):
                raise ShapeMismatch(f"all_gather: {len(outs)} outputs for {len(parts)} members")
            for out, p in zip(outs, parts):
                _write(out, p[i], "all_gather")
        return _Done(output_lists)

    def all_gather_single(self, output: torch.Tensor, input: torch.Tensor,
                          opts: Any = None) -> dist.Work:
        return self.all_gather_single_coalesced([output], [input], opts)

    def all_gather_single_coalesced(self, outputs: list, inputs: list,
                                    opts: Any = None) -> dist.Work:
        """all_gather_into_tensor (and the functional all_gather_tensor): the members'
        inputs end to end along dim 0."""
        parts = self._exchange("allgather_into_tensor", [_snapshot(t) for t in inputs])
        for i, out in enumerate(outputs):
            _check_same("all_gather_into_tensor", [_signature(p[i]) for p in parts])
            _write(out, torch.cat([p[i].reshape(-1) for p in parts]), "all_gather_into_tensor")
        return _Done(outputs)

    allgather_into_tensor_coalesced = all_gather_single_coalesced

    def gather(self, output_lists: list, inputs: list, opts: Any) -> dist.Work:
        root = opts.rootRank
        parts = self._exchange(f"gather(root={root})", [_snapshot(t) for t in inputs])
        if self.member == root:
            for i, outs in enumerate(output_lists):
                _check_same("gather", [_signature(p[i]) for p in parts])
                for out, p in zip(outs, parts):
                    _write(out, p[i], "gather")
        return _Done(output_lists)

    def broadcast(self, tensors: list, opts: Any) -> dist.Work:
        root = opts.rootRank
        payload = [_snapshot(t) for t in tensors] if self.member == root else None
        parts = self._exchange(f"broadcast(root={root})", payload)
        for t, value in zip(tensors, parts[root]):
            _write(t, value, "broadcast")
        return _Done(tensors)

    def scatter(self, outputs: list, input_lists: list, opts: Any) -> dist.Work:
        root = opts.rootRank
        payload = ([[_snapshot(t) for t in inputs] for inputs in input_lists]
                   if self.member == root else None)
        parts = self._exchange(f"scatter(root={root})", payload)
        for i, out in enumerate(outputs):
            _write(out, parts[root][i][self.member], "scatter")
        return _Done(outputs)

    def alltoall(self, outputs: list, inputs: list, opts: Any = None) -> dist.Work:
        """all_to_all (torch.distributed.nn.all_gather's backward on this backend)."""
        parts = self._exchange("alltoall", [_snapshot(t) for t in inputs])
        for out, p in zip(outputs, parts):
            _write(out, p[self.member], "all_to_all")
        return _Done(outputs)

    def all_to_all_single(self, output: torch.Tensor, input: torch.Tensor,
                          output_splits: list, input_splits: list,
                          opts: Any = None) -> dist.Work:
        size = self.size()
        splits = list(input_splits) or [input.shape[0] // size] * size
        payload = list(torch.split(_snapshot(input), splits, dim=0))
        parts = self._exchange("all_to_all_single", payload)
        _write(output, torch.cat([p[self.member] for p in parts], dim=0), "all_to_all_single")
        return _Done([output])

    alltoall_base = all_to_all_single

    def barrier(self, opts: Any = None) -> dist.Work:
        self._exchange("barrier", None)
        return _Done()

    # point-to-point

    def send(self, tensors: list, dst: int, tag: int) -> dist.Work:
        src_world = self.sim_group.ranks[self.member]
        self.sim_world.post(src_world, self.sim_group.ranks[dst], tag,
                            [_snapshot(t) for t in tensors])
        return _Done(tensors)

    def recv(self, tensors: list, src: int, tag: int) -> dist.Work:
        world, ranks = self.sim_world, self.sim_group.ranks
        ticket = world.reserve(ranks[src], ranks[self.member], tag)

        def receive() -> None:
            sent = world.receive(ticket)
            if [_signature(t) for t in sent] != [_signature(t) for t in tensors]:
                raise ShapeMismatch(f"recv from rank {ranks[src]} (tag {tag}): sent "
                                    f"{[_signature(t) for t in sent]}, receive buffer "
                                    f"{[_signature(t) for t in tensors]}")
            for t, value in zip(tensors, sent):
                _write(t, value, "recv")

        return _PendingRecv(receive, src)

    def recv_anysource(self, tensors: list, tag: int) -> dist.Work:
        raise UnsupportedOperation("recv from any source (src=None) is not supported "
                                   "in-process: name the source rank")


def bind_thread(world, ctx):
    """Thread mode, first thing on the rank's thread: its torch default group, and the
    torch group of its DP group as ctx.dp_group (what the adapter passes to torch)."""
    bind_rank(world, ctx.world_rank)
    ctx.dp_group = dp_group(world, ctx.dp, ctx.replica)
