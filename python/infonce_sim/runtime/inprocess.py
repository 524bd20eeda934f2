"""The in-process, deterministic multi-rank runtime: W virtual ranks in one process.

Every virtual
rank has its own model replica and its own random state (numpy's global generator,
torch's, Python's `random`); only one rank runs at a time, in a fixed order, so the
same inputs give the same bits on every run.

Two ways to run a rank, one scheduler:
  * an adapter written as a generator (the `conformance` adapter) yields its
    collectives; the scheduler advances the ranks' generators in turn (no threads), and
    after every rank's last micro-step runs the backward of each micro-step, in order, in
    one autograd call for all ranks (the graphs are disjoint, so each replica's gradient
    has the bits of its own backward);
  * an adapter written as a plain function (a trainer's real code) calls
    torch.distributed itself; each rank then runs on its own thread and a baton
    (one semaphore per rank) lets exactly one thread run at a time. Each rank thread
    has its own default process group of the "infonce" backend (backend.py), whose
    collectives are this scheduler's slots: torch.distributed's own functions,
    autograd functions and functional collectives answer for the rank.

The scheduler: resume every rank, in world-rank order, that is not waiting on an
incomplete collective; a rank runs until it blocks on a collective (the last
member to arrive completes it and carries on) or finishes. A round in which no
rank can run is a deadlock (ranks called different collectives, or a recv whose
message is never sent): DeadlockError.

The DDP reduction is explicit, after every rank's last micro-step (gradient
accumulation sends nothing before): `mean` sums g_w / W over all W ranks in
rank order (as DDP divides each bucket by W, then all-reduces), `sum` sums over
each DP group in group-rank order.
"""

import ctypes
import pickle
import random
import struct
import threading

import numpy as np
import torch

from .rank import Collective, seed_value


class RuntimeError_(Exception):
    """The step failed (an adapter error, a deadlock, a collective mismatch)."""


class DeadlockError(RuntimeError_):
    """Every unfinished rank waits on something no other rank will complete."""


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

    __slots__ = ("op", "group", "payloads", "arrived", "results", "reduce_op", "shared")

    def __init__(self, op, group, reduce_op):
        self.op, self.group, self.reduce_op = op, group, reduce_op
        self.payloads = [None] * group.size()
        self.arrived = 0
        self.results = None
        self.shared = True  # every member only reads what it receives (Collective.shared)


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
    if slot.op.startswith("pg."):  # backend.py: every member computes its own result
        slot.results = [p] * len(p)
    elif slot.op == "all_gather_object":
        if slot.shared:  # the senders' (detached) objects themselves: nobody writes them
            slot.results = [list(p) for _ in p]
        else:
            slot.results = [[_copy_object(x) for x in p] for _ in p]
    elif slot.op == "all_gather":
        shapes = {tuple(t.shape) for t in p}
        if len(shapes) != 1:
            raise RuntimeError_(f"all_gather: tensors of different shapes {sorted(shapes)}")
        if slot.shared:
            slot.results = [list(p) for _ in p]
        else:
            slot.results = [[t.detach().clone() for t in p] for _ in p]
    elif slot.op == "all_reduce":
        total = _reduce([t.detach() for t in p], slot.reduce_op)
        slot.results = [total.clone() for _ in p]
    elif slot.op == "reduce_scatter":  # payload: every member's list of per-member tensors
        slot.results = [_reduce([parts[i] for parts in p], "sum") for i in range(len(p))]
    elif slot.op == "barrier":
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


class _Receive:
    """A point-to-point receive waiting for the k-th message of its channel
    (source, destination, tag); `results` is None until that message is posted."""

    __slots__ = ("channel", "index", "messages")

    def __init__(self, channel, index, messages):
        self.channel, self.index, self.messages = channel, index, messages

    @property
    def results(self):
        return self.messages if len(self.messages) > self.index else None

    def describe(self):
        src, dst, tag = self.channel
        return f"recv from rank {src} (tag {tag}, message {self.index + 1})"


def _describe(waiting):
    if isinstance(waiting, _Receive):
        return waiting.describe()
    return f"{waiting.op} on {waiting.group}"


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
    """Each rank's state of the process's global generators, swapped in lazily.

    A user's loss may draw from numpy's global generator, torch's CPU one and Python's
    `random`, and must see its own rank's streams, as on separate processes. A state is
    an immutable snapshot, shared by every rank holding it (all ranks of a `synced`
    case start from one); the globals are written only when the next rank's snapshot is
    not the one they hold, and after a rank ran its snapshot is kept unless the state
    read back differs (the rank drew). Reads and writes are direct memory copies where
    the layout is known (probed and checked at start-up; else the public get/set):

    * numpy: the MT19937 words (key, position) through the bit generator's ctypes
      address, and RandomState's cached Gaussian (has_gauss, gauss: kept outside the
      bit generator; a draw may consume it without touching the words); ~1 us, where
      the legacy get_state/set_state cost ~30 us each;
    * Python: the `_random.Random` object's words (index, key) and `gauss_next`;
    * torch: get_state/set_state (~1 us each), compared as bytes.

    `enter(generators)`: the globals the adapter can observe (an adapter may declare
    fewer: `random_generators`, python/README.md); the others are neither seeded nor
    swapped. A rank's state is a tuple (numpy, torch, python) of snapshots (None for a
    generator not in use); a snapshot's first item is its bytes, compared on save.
    """

    GENERATORS = ("numpy", "torch", "python")
    MT_BYTES = 624 * 4 + 4  # numpy's mt19937_state: uint32 key[624]; int pos
    PY_OFFSET = 16  # CPython: PyObject_HEAD, then RandomObject's int index; uint32 state[624]
    PY_BYTES = 4 + 624 * 4
    SEEDED_CACHE = 256  # seeds whose snapshots are kept (shrinking re-runs one case's seed)

    def __init__(self):
        legacy = np.random.mtrand._rand
        bit_generator = legacy._bit_generator
        assert type(bit_generator).__name__ == "MT19937", type(bit_generator)
        self.np_address = bit_generator.ctypes.state_address
        self.np_gauss = _numpy_gauss_address(legacy, self.np_address)
        self.torch = torch.default_generator
        self.py = random._inst
        self.py_address = (id(self.py) + self.PY_OFFSET
                           if _python_layout_ok(self.py, self.PY_OFFSET) else None)
        self.use = (True, True, True)
        self.loaded = (None, None, None)  # the snapshots the globals hold (None: unknown)
        self.seeded_cache = {}

    def enter(self, generators=GENERATORS):
        """A case starts: nothing is known of what the globals hold."""
        self.use = tuple(g in generators for g in self.GENERATORS)
        self.loaded = (None, None, None)

    def seeded(self, seed):
        """The snapshots of every generator in use right after seeding with `seed`.

        The globals stay unknown (`loaded`): code outside the ranks may draw before the
        first rank runs (a new replica's initialisation does), so the first load writes."""
        key = (seed, self.use)
        snapshots = self.seeded_cache.get(key)
        if snapshots is None:
            use_np, use_torch, use_py = self.use
            if use_np:
                np.random.seed(seed % 2**32)  # also drops a cached Gaussian
            if use_torch:
                self.torch.manual_seed(seed)  # CPU only: torch.manual_seed also queues CUDA work
            if use_py:
                random.seed(seed)
            snapshots = (self._read_np(None) if use_np else None,
                         self._read_torch(None) if use_torch else None,
                         self._read_py(None) if use_py else None)
            if len(self.seeded_cache) >= self.SEEDED_CACHE:
                self.seeded_cache.clear()
            self.seeded_cache[key] = snapshots
        return snapshots

    def load(self, state):
        """Put a rank's snapshots into the globals (those the globals do not hold)."""
        np_state, torch_state, py_state = state
        loaded_np, loaded_torch, loaded_py = self.loaded
        if np_state is not loaded_np and np_state is not None:
            if self.np_gauss is not None:
                ctypes.memmove(self.np_address, np_state[0], self.MT_BYTES)
                ctypes.memmove(self.np_gauss, np_state[1], _GAUSS_BYTES)
            else:
                np.random.set_state(np_state[1])
        if torch_state is not loaded_torch and torch_state is not None:
            self.torch.set_state(torch_state[1])
        if py_state is not loaded_py and py_state is not None:
            if self.py_address is not None:
                ctypes.memmove(self.py_address, py_state[0], self.PY_BYTES)
                self.py.gauss_next = py_state[1]
            else:
                random.setstate(py_state[1])
        self.loaded = state

    def save(self):
        """The snapshots the globals hold now: the running rank's, after it ran."""
        loaded_np, loaded_torch, loaded_py = self.loaded
        use_np, use_torch, use_py = self.use
        state = (self._read_np(loaded_np) if use_np else None,
                 self._read_torch(loaded_torch) if use_torch else None,
                 self._read_py(loaded_py) if use_py else None)
        self.loaded = state
        return state

    # -- one generator: (bytes, what to write back); the previous snapshot when unchanged ----

    def _read_np(self, previous):
        if self.np_gauss is not None:
            words = ctypes.string_at(self.np_address, self.MT_BYTES)
            gauss = ctypes.string_at(self.np_gauss, _GAUSS_BYTES)
            if previous is not None and words == previous[0] and gauss == previous[1]:
                return previous
            return (words, gauss)
        full = np.random.get_state()
        data = full[1].tobytes() + struct.pack("=qqd", full[2], full[3], full[4])
        return previous if previous is not None and data == previous[0] else (data, full)

    def _read_torch(self, previous):
        state = self.torch.get_state()
        data = state.numpy().tobytes()
        return previous if previous is not None and data == previous[0] else (data, state)

    def _read_py(self, previous):
        if self.py_address is None:
            state = random.getstate()
            return previous if previous is not None and state == previous[1] else (state, state)
        words = ctypes.string_at(self.py_address, self.PY_BYTES)
        gauss = self.py.gauss_next
        if previous is not None and words == previous[0] and gauss == previous[1]:
            return previous
        return (words, gauss)


# RandomState's aug_bitgen_t {bitgen_t *bit_generator; int has_gauss; double gauss}: the
# bytes from has_gauss to the end of gauss.
_GAUSS_BYTES = 16


def _numpy_gauss_address(legacy, state_address):
    """The address of `legacy` (numpy's global RandomState)'s has_gauss, or None.

    Cython lays the object out as: ..., bitgen_t _bitgen {void *state; ...}, aug_bitgen_t
    _aug_state {bitgen_t *bit_generator = &_bitgen; int has_gauss; double gauss}. Found by
    the two pointers, then checked against get_state() with and without a cached
    Gaussian; the global state is restored."""
    pointer = struct.Struct("=Q")
    base = id(legacy)
    memory = ctypes.string_at(base, 256)
    bitgen = [off for off in range(0, 256 - 7, 8)
              if pointer.unpack_from(memory, off)[0] == state_address]
    if len(bitgen) != 1:
        return None
    aug = [off for off in range(0, 256 - 7, 8)
           if pointer.unpack_from(memory, off)[0] == base + bitgen[0]]
    if len(aug) != 1:
        return None
    address = base + aug[0] + 8
    saved = np.random.get_state()
    try:
        np.random.seed(20240601)
        checks = []
        for _ in range(3):  # caches a Gaussian, uses it, caches another
            np.random.standard_normal()
            has_gauss, gauss = struct.unpack("=i4xd", ctypes.string_at(address, _GAUSS_BYTES))
            state = np.random.get_state()
            checks.append(has_gauss == state[3] and (not has_gauss or gauss == state[4]))
        return address if all(checks) else None
    finally:
        np.random.set_state(saved)


def _python_layout_ok(generator, offset):
    """Whether `generator`'s (index, key words) sit at `offset` as CPython's RandomObject
    lays them out: compared with getstate() on a probe state, then restored."""
    saved = generator.getstate()
    try:
        generator.seed(20240601)
        _, internal, _ = generator.getstate()
        words = ctypes.string_at(id(generator) + offset, 4 + 624 * 4)
        return len(internal) == 625 and words == struct.pack("=i624I", internal[624],
                                                             *internal[:624])
    except (TypeError, ValueError, struct.error):
        return False
    finally:
        generator.setstate(saved)


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
        self.models = {}  # (world rank, D, F, dtype) -> (nn.Linear, its weight)
        self.log = []  # (world rank, op, group ranks) of every collective, in call order
        self.mail = {}  # (source, destination, tag) -> messages sent, in order (backend.py)
        self.receives = {}  # (source, destination, tag) -> receives posted
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
        """Our Group of `group`: None (the world), a Group, or a backend.InProcessGroup."""
        return self.world_group if group is None else getattr(group, "sim_group", group)

    def deposit(self, rank, op, group, payload, reduce_op="sum", shared=False):
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
        slot.shared = slot.shared and shared
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

    # -- point-to-point (thread mode, backend.py) ---------------------------------------------

    def post(self, src, dst, tag, payload):
        """A send: buffered (it never blocks), in order on its channel."""
        self.mail.setdefault((src, dst, tag), []).append(payload)

    def reserve(self, src, dst, tag):
        """A posted receive: it will take the next message of its channel not yet taken."""
        channel = (src, dst, tag)
        index = self.receives.get(channel, 0)
        self.receives[channel] = index + 1
        return _Receive(channel, index, self.mail.setdefault(channel, []))

    def receive(self, ticket):
        """Wait (yielding the baton) until the ticket's message is sent; return it."""
        if ticket.results is None:
            rank = self.current
            rank.waiting = ticket
            self._yield_to_scheduler(rank)
        return ticket.messages[ticket.index]

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

    def _seed_rng(self, case, generators):
        """Each rank's initial random state (numpy, torch, Python), from the case's `rng`."""
        self.rng.enter(generators)
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
            rank.rng = self.rng.save()

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
                                        request.reduce_op, request.shared)
            if slot.results is None:
                rank.waiting, rank.result = slot, (slot, member)
                return
            value = _deliver(request, slot.results[member])

    def run_ranks(self, programs, threaded):
        """Run one program per rank to the end; returns every rank's output (or raises)."""
        self.slots.clear()
        self.sequence.clear()
        self.log.clear()
        self.mail.clear()
        self.receives.clear()
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
                stuck = ", ".join(f"rank {r.world_rank} in {_describe(r.waiting)}"
                                  for r in self.ranks if not r.finished)
                self._abort(threaded)
                raise DeadlockError(f"deadlock: every unfinished rank waits ({stuck})")
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

    def replicas(self, weight):
        """Every rank's replica (built once per shape and dtype), holding `weight`, no gradient."""
        rows, features = weight.shape
        modules = []
        for world_rank in range(self.world):
            key = (world_rank, rows, features, weight.dtype)
            entry = self.models.get(key)
            if entry is None:
                module = _linear(rows, features, weight.dtype)
                entry = self.models[key] = (module, module.weight)
            module, parameter = entry
            # (written through a detached alias: the copy outside autograd, as under
            # torch.no_grad(), without that context manager's Python)
            parameter.detach().copy_(weight)
            parameter.grad = None
            modules.append(module)
        return modules

    def dp_group(self, case, replica):
        return self.group([replica + i * case.replicas for i in range(case.dp)])


def _linear(rows: int, features: int, dtype: torch.dtype) -> torch.nn.Linear:
    """nn.Linear(features, rows, bias=False) of `dtype`, its weight uninitialised.

    The caller copies the case's weight in, so nn.Linear's own __init__ (its Kaiming
    initialisation, a draw from torch's global generator whose values would be
    overwritten; no rank observes that generator before its own state is loaded,
    RandomStates.enter) is skipped: the module gets what that __init__ sets, an empty
    weight of the shape and dtype, and no bias."""
    module = torch.nn.Linear.__new__(torch.nn.Linear)
    torch.nn.Module.__init__(module)
    module.in_features, module.out_features = features, rows
    module.weight = torch.nn.Parameter(torch.empty((rows, features), dtype=dtype))
    module.register_parameter("bias", None)
    return module


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


def backward_scalars(roots):
    """torch.autograd.backward(roots) of scalar roots (each rank's loss of one micro-step):
    the engine call it makes, each root's gradient a one as its _make_grads builds, without
    the Python of its argument handling (twice a case, a few percent of a small one)."""
    grads = [torch.ones_like(root, memory_format=torch.preserve_format) for root in roots]
    _ENGINE.run_backward(tuple(roots), tuple(grads), False, False, (), True, True)


_ENGINE = torch.autograd.Variable._execution_engine


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


def blocking_fulfil(world):
    """Thread mode: a yielded Collective (if any), done by a blocking collective."""

    def fulfil(request):
        result = world.collective_blocking(request.op, request.group, request.payload,
                                           request.reduce_op)
        return _deliver(request, result)

    return fulfil
