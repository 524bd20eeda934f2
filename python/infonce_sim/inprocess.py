"""The in-process, deterministic multi-rank runtime: W virtual ranks in one process.

Debian's torch 1.13 has no threaded process group, so this is ours. Every virtual
rank has its own model replica and its own random state (numpy's global generator,
torch's, Python's `random`); only one rank runs at a time, in a fixed order, so the
same inputs give the same bits on every run.

Two ways to run a rank, one scheduler:
  * an adapter written as a generator (the `conformance` adapter) yields its
    collectives; the scheduler advances the ranks' generators in turn (no threads), and
    runs every rank's backward of a micro-step in one autograd call (the graphs are
    disjoint, so each replica's gradient has the bits of its own backward);
  * an adapter written as a plain function (a trainer's real code) calls
    torch.distributed itself; each rank then runs on its own thread and a baton
    (one semaphore per rank) lets exactly one thread run at a time. While a case
    runs, torch.distributed's functions are replaced by stand-ins that answer
    for the rank holding the baton.

The scheduler: resume every rank, in world-rank order, that is not waiting on an
incomplete collective; a rank runs until it blocks on a collective (the last
member to arrive completes it and carries on) or finishes. A round in which no
rank can run is a deadlock (ranks called different collectives): an error.

The DDP reduction is explicit, after every rank's last micro-step (gradient
accumulation sends nothing before): `mean` sums g_w / W over all W ranks in
rank order (as DDP divides each bucket by W, then all-reduces), `sum` sums over
each DP group in group-rank order.
"""

import ctypes
import pickle
import random
import threading

import numpy as np
import torch

from .rank import Collective, RankContext, drive, is_generator_adapter, rank_program, seed_value


class RuntimeError_(Exception):
    """The step failed (an adapter error, a deadlock, a collective mismatch)."""


class Group:
    """A process group of the in-process world: its members' world ranks, in group-rank order."""

    def __init__(self, ranks):
        self.ranks = tuple(ranks)
        self.index = {w: i for i, w in enumerate(self.ranks)}

    def size(self):
        return len(self.ranks)

    def __repr__(self):
        return f"Group{self.ranks}"


class _Slot:
    """The k-th collective on one group: every member's contribution, then its results."""

    __slots__ = ("op", "group", "payloads", "arrived", "results", "reduce_op")

    def __init__(self, op, group, reduce_op):
        self.op, self.group, self.reduce_op = op, group, reduce_op
        self.payloads = [None] * group.size()
        self.arrived = 0
        self.results = None


def _copy_object(obj):
    """What all_gather_object hands a receiver: a copy, cut from the sender's graph.

    (Real torch pickles: tensors arrive as new leaves keeping requires_grad.)
    """
    if isinstance(obj, torch.Tensor):
        return obj.detach().clone().requires_grad_(obj.requires_grad)
    return pickle.loads(pickle.dumps(obj))


def _reduce(tensors, reduce_op):
    out = tensors[0].clone()
    for t in tensors[1:]:
        if reduce_op == "sum":
            out.add_(t)
        elif reduce_op == "max":
            torch.maximum(out, t, out=out)
        elif reduce_op == "min":
            torch.minimum(out, t, out=out)
        elif reduce_op == "product":
            out.mul_(t)
        else:
            raise RuntimeError_(f"all_reduce: unsupported op {reduce_op}")
    return out


def _complete(slot):
    p = slot.payloads
    if slot.op == "all_gather_object":
        slot.results = [[_copy_object(x) for x in p] for _ in p]
    elif slot.op == "all_gather":
        shapes = {tuple(t.shape) for t in p}
        if len(shapes) != 1:
            raise RuntimeError_(f"all_gather: tensors of different shapes {sorted(shapes)}")
        slot.results = [[t.detach().clone() for t in p] for _ in p]
    elif slot.op == "all_reduce":
        total = _reduce([t.detach() for t in p], slot.reduce_op)
        slot.results = [total.clone() for _ in p]
    elif slot.op == "reduce_scatter":  # payload: every member's list of per-member tensors
        slot.results = [_reduce([parts[i] for parts in p], "sum") for i in range(len(p))]
    elif slot.op == "barrier":
        slot.results = [None] * len(p)
    elif slot.op == "backward":  # every rank's graph at once: one engine call, disjoint graphs
        torch.autograd.backward(list(p))
        slot.results = [None] * len(p)
    else:
        raise AssertionError(slot.op)


def _signal():
    """A binary semaphore starting at 0: release() signals, acquire() waits for a signal.

    A plain lock (C, no Python-level Condition as threading.Semaphore has), released by the
    signalling thread: each baton handoff is one C-level release and acquire.
    """
    lock = threading.Lock()
    lock.acquire()
    return lock


class _Aborted(BaseException):
    """Raised in a rank's thread to unwind it when another rank failed."""


class _VirtualRank:
    def __init__(self, world_rank):
        self.world_rank = world_rank
        self.go = _signal()
        self.job = None  # thread mode: the callable to run next
        self.thread = None
        self.reset()

    def reset(self):
        self.program = None
        self.waiting = None  # the _Slot this rank is blocked on
        self.result = None  # the value to send into a resumed generator
        self.finished = False
        self.output = None
        self.error = None
        self.rng = None  # (numpy state, torch state, python state)


class RandomStates:
    """Swaps the process's global generators (numpy's, torch's CPU one, Python's) per rank.

    numpy's legacy get_state/set_state cost ~30 us each, and a case switches ranks
    dozens of times, so the MT19937 words (key and position) are copied directly
    through the bit generator's ctypes address (~1 us); the full state is read only
    when a rank's words changed and written only when a cached Gaussian is involved
    (RandomState keeps that cache outside the bit generator). A rank's saved state
    is (MT words, full numpy state or None when it holds no cached Gaussian, torch
    state, Python state).
    """

    MT_BYTES = 624 * 4 + 4  # mt19937_state: uint32 key[624]; int pos

    def __init__(self):
        bit_generator = np.random.mtrand._rand._bit_generator
        assert type(bit_generator).__name__ == "MT19937", type(bit_generator)
        self.address = bit_generator.ctypes.state_address
        self.torch = torch.default_generator
        self.loaded_words = None  # the MT words last written (or read) for a rank
        self.global_gauss = True  # whether the global state may hold a cached Gaussian

    def _words(self):
        return ctypes.string_at(self.address, self.MT_BYTES)

    def enter(self):
        """A case starts: the global state is whatever it was (assume the worst)."""
        self.loaded_words = None
        self.global_gauss = True

    def seeded(self, seed):
        """The state every generator has after seeding with `seed` (globals left changed)."""
        np.random.seed(seed % 2**32)
        self.torch.manual_seed(seed)  # CPU only: torch.manual_seed also queues CUDA work
        random.seed(seed)
        self.global_gauss = False
        return (self._words(), None, self.torch.get_state(), random.getstate())

    def load(self, state):
        words, full, torch_state, python_state = state
        if full is not None or self.global_gauss:
            np.random.set_state(full if full is not None else _numpy_state_from_words(words))
            self.global_gauss = full is not None
        elif words != self.loaded_words:
            ctypes.memmove(self.address, words, self.MT_BYTES)
        self.loaded_words = words
        self.torch.set_state(torch_state)
        random.setstate(python_state)

    def save(self, before):
        words = self._words()
        full = before[1]
        if words != self.loaded_words:  # the rank drew numbers: read the cached Gaussian too
            state = np.random.get_state()
            full = state if state[3] else None
            self.global_gauss = bool(state[3])
        self.loaded_words = words
        return (words, full, self.torch.get_state(), random.getstate())


def _numpy_state_from_words(words):
    key = np.frombuffer(words, dtype=np.uint32, count=624).copy()
    pos = int.from_bytes(words[624 * 4:], "little", signed=True)
    return ("MT19937", key, pos, 0, 0.0)


class World:
    """W virtual ranks, reused across cases of world size W (threads, models, groups)."""

    def __init__(self, world):
        self.world = world
        self.ranks = [_VirtualRank(w) for w in range(world)]
        self.groups = {}
        self.world_group = self.group(range(world))
        self.main_go = _signal()
        self.current = None
        self.aborting = False
        self.sequence = {}  # (group ranks, member) -> collectives this member has called
        self.slots = {}  # (group ranks, k) -> _Slot
        self.models = {}  # (world rank, D, F, dtype) -> nn.Linear
        self.log = []  # (world rank, op, group ranks) of every collective, in call order
        self.rng = RandomStates()

    # -- groups and collectives -------------------------------------------------------------

    def group(self, ranks):
        key = tuple(ranks)
        for w in key:
            if not 0 <= w < self.world:
                raise RuntimeError_(f"new_group: rank {w} outside the world of {self.world}")
        if key not in self.groups:
            self.groups[key] = Group(key)
        return self.groups[key]

    def resolve(self, group):
        return self.world_group if group is None else group

    def deposit(self, rank, op, group, payload, reduce_op="sum"):
        """Add this rank's contribution to its next collective on `group`; return the slot."""
        group = self.resolve(group)
        if rank.world_rank not in group.index:
            raise RuntimeError_(f"rank {rank.world_rank} called {op} on {group}, "
                                "which it is not a member of")
        member = group.index[rank.world_rank]
        k = self.sequence.get((group.ranks, member), 0)
        self.sequence[(group.ranks, member)] = k + 1
        slot = self.slots.get((group.ranks, k))
        if slot is None:
            slot = self.slots[(group.ranks, k)] = _Slot(op, group, reduce_op)
        if slot.op != op or slot.reduce_op != reduce_op:
            raise RuntimeError_(f"collective mismatch on {group}: rank {rank.world_rank} "
                                f"called {op}, another member {slot.op}")
        self.log.append((rank.world_rank, op, group.ranks))
        slot.payloads[member] = payload
        slot.arrived += 1
        if slot.arrived == group.size():
            del self.slots[(group.ranks, k)]
            _complete(slot)
        return slot, member

    def collective_blocking(self, op, group, payload, reduce_op="sum"):
        """Thread mode: called on the rank's thread by a torch.distributed stand-in."""
        rank = self.current
        assert rank is not None, "a torch.distributed stand-in was called outside a rank"
        slot, member = self.deposit(rank, op, group, payload, reduce_op)
        if slot.results is None:
            rank.waiting = slot
            self._yield_to_scheduler(rank)
        return slot.results[member]

    # -- threads ------------------------------------------------------------------------------

    def _yield_to_scheduler(self, rank):
        self.main_go.release()
        rank.go.acquire()
        if self.aborting:
            raise _Aborted()

    def _thread_main(self, rank):
        while True:
            rank.go.acquire()
            job = rank.job
            if job is None:  # shutdown
                return
            try:
                rank.output = job()
            except _Aborted:
                pass
            except BaseException as e:  # noqa: BLE001 - reported as the step's error
                rank.error = e
            rank.finished = True
            rank.job = None
            self.main_go.release()

    def _ensure_thread(self, rank):
        if rank.thread is None:
            rank.thread = threading.Thread(target=self._thread_main, args=(rank,), daemon=True,
                                           name=f"infonce-rank-{rank.world_rank}")
            rank.thread.start()

    def close(self):
        for rank in self.ranks:
            if rank.thread is not None:
                rank.job = None
                rank.go.release()
                rank.thread.join(timeout=5)
                rank.thread = None

    # -- random state per rank -----------------------------------------------------------------

    def _seed_rng(self, case):
        """Each rank's initial random state (numpy, torch, Python), from the case's `rng`."""
        self.rng.enter()
        for rank in self.ranks:
            rank.rng = self.rng.seeded(seed_value(case, rank.world_rank))

    # -- the scheduler ----------------------------------------------------------------------

    def _resume(self, rank, threaded):
        self.rng.load(rank.rng)
        self.current = rank
        try:
            if threaded:
                rank.go.release()
                self.main_go.acquire()
            else:
                self._advance(rank)
        finally:
            self.current = None
            rank.rng = self.rng.save(rank.rng)

    def _advance(self, rank):
        """Generator mode: run the rank's program until it waits on a collective or ends."""
        value = rank.result
        while True:
            try:
                request = rank.program.send(value)
            except StopIteration as stop:
                rank.output, rank.finished = stop.value, True
                return
            except Exception as e:  # noqa: BLE001 - reported as the step's error
                rank.error, rank.finished = e, True
                return
            if not isinstance(request, Collective):
                rank.error = RuntimeError_(f"the adapter yielded {type(request).__name__}, "
                                           "not a Collective")
                rank.finished = True
                return
            slot, member = self.deposit(rank, request.op, request.group, request.payload,
                                        request.reduce_op)
            if slot.results is None:
                rank.waiting, rank.result = slot, (slot, member)
                return
            value = _deliver(request, slot.results[member])

    def run_ranks(self, programs, threaded):
        """Run one program per rank to the end; returns every rank's output (or raises)."""
        self.slots.clear()
        self.sequence.clear()
        self.log.clear()
        self.aborting = False
        for rank, program in zip(self.ranks, programs):
            if threaded:
                self._ensure_thread(rank)
                rank.job = program
            else:
                rank.program = program
        while True:
            runnable = False
            pending = False
            for rank in self.ranks:
                if rank.finished:
                    continue
                pending = True
                if rank.waiting is not None:
                    if rank.waiting.results is None:
                        continue
                    if not threaded:  # hand the completed collective's result to the generator
                        slot, member = rank.result
                        rank.result = _deliver_slot(slot, member)
                    rank.waiting = None
                runnable = True
                self._resume(rank, threaded)
                if rank.error is not None:
                    self._abort(threaded)
                    raise rank.error
            if not pending:
                break
            if not runnable:
                self._abort(threaded)
                stuck = ", ".join(f"rank {r.world_rank} in {r.waiting.op} on {r.waiting.group}"
                                  for r in self.ranks if not r.finished)
                raise RuntimeError_(f"deadlock: every unfinished rank waits ({stuck})")
        return [rank.output for rank in self.ranks]

    def _abort(self, threaded):
        """Unwind every unfinished rank (threads raise _Aborted; generators are closed)."""
        self.aborting = True
        for rank in self.ranks:
            if rank.finished:
                continue
            if threaded:
                rank.go.release()
                self.main_go.acquire()
            elif rank.program is not None:
                rank.program.close()
            rank.finished = True
        self.aborting = False

    # -- one case -------------------------------------------------------------------------------

    def model(self, world_rank, weight):
        """This rank's replica (built once per shape and dtype), holding `weight`, no gradient."""
        rows, features = weight.shape
        key = (world_rank, rows, features, weight.dtype)
        module = self.models.get(key)
        if module is None:
            module = self.models[key] = torch.nn.Linear(features, rows,
                                                        bias=False).to(weight.dtype)
        with torch.no_grad():
            module.weight.copy_(weight)
        module.weight.grad = None
        return module

    def dp_group(self, case, replica):
        return self.group([replica + i * case.replicas for i in range(case.dp)])


def _deliver(request, result):
    """What `yield Collective(...)` evaluates to; all_reduce also writes into the payload."""
    if request.op == "all_reduce":
        request.payload.copy_(result)
        return request.payload
    return result


def _deliver_slot(slot, member):
    result = slot.results[member]
    if slot.op == "all_reduce":
        slot.payloads[member].copy_(result)
        return slot.payloads[member]
    return result


def reduce_gradients(case, grads):
    """The DDP reduction over every rank's local gradient (None: the rank's parameter got none)."""
    grads = [torch.zeros_like(grads[0]) if g is None else g for g in grads] if any(
        g is not None for g in grads) else None
    if grads is None:
        raise RuntimeError_("no rank's encoder weight received a gradient")
    if case.reduction == "mean":
        total = grads[0] / case.world
        for g in grads[1:]:
            total = total + g / case.world
        return [total] * case.world
    out = [None] * case.world
    for replica in range(case.replicas):
        members = [replica + i * case.replicas for i in range(case.dp)]
        total = grads[members[0]].clone()
        for w in members[1:]:
            total = total + grads[w]
        for w in members:
            out[w] = total
    return out


class InProcessRuntime:
    """Runs cases on virtual ranks; keeps one World per world size."""

    name = "in-process"

    def __init__(self):
        self.worlds = {}

    def world(self, size):
        if size not in self.worlds:
            self.worlds[size] = World(size)
        return self.worlds[size]

    def run(self, adapter, case, replays_draws=True):
        """{losses, grad, grads, padding_draws} of one case (raises on a failed step)."""
        from . import standin  # torch.distributed stand-ins: only for threaded adapters

        world = self.world(case.world)
        for rank in world.ranks:
            rank.reset()
        world._seed_rng(case)
        dtype = torch.float64 if case.dtype == "float64" else torch.float32
        weight = torch.tensor(case.weight, dtype=dtype)
        inputs = {}  # (micro, DP shard) -> (x, labels): replicas read the same input tensors
        contexts = [
            RankContext(case, w, world.model(w, weight), world.dp_group(case, w % case.replicas),
                        replays_draws, inputs)
            for w in range(case.world)
        ]
        threaded = not is_generator_adapter(adapter)
        if threaded:
            programs = [_blocking_program(adapter, ctx, world) for ctx in contexts]
            with standin.installed(world):
                losses = world.run_ranks(programs, threaded=True)
        else:
            losses = world.run_ranks(
                [rank_program(adapter, ctx, batched_backward=True) for ctx in contexts],
                threaded=False)
        grads = reduce_gradients(case, [ctx.model.weight.grad for ctx in contexts])
        return {
            "losses": losses,
            "grad": grads[0],
            "grads": grads,
            "padding_draws": [[ctx.draws[m] for ctx in contexts] for m in range(case.steps)],
        }

    def close(self):
        for world in self.worlds.values():
            world.close()
        self.worlds.clear()


def _blocking_program(adapter, ctx, world):
    """Thread mode: the rank program, its yields (if any) fulfilled by blocking collectives."""

    def fulfil(request):
        result = world.collective_blocking(request.op, request.group, request.payload,
                                           request.reduce_op)
        return _deliver(request, result)

    return lambda: drive(rank_program(adapter, ctx), fulfil)
