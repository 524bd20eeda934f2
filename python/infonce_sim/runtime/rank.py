"""What every runtime shares: one rank's view of a case and the rank's step program.

An adapter sees a case through a RankContext (its mesh coordinates, its model
replica, its inputs, its padding stream) and computes one micro-step's loss. The
runtime runs `rank_program` on every rank: forward, the adapter's loss, backward,
gradient accumulation; the DDP reduction after the last micro-step is the
runtime's (in-process: explicit; real DDP: DistributedDataParallel).

Collectives an adapter written as a generator yields (`Collective`) are
fulfilled by the runtime: by the in-process scheduler without threads, or by
real torch.distributed calls under DDP. An adapter written as a plain function
calls torch.distributed itself.
"""

import contextlib
import inspect

import torch
import torch.nn.functional as F
import torch.nn.modules.module as _module

from ..cases.spec import DrawStream, normalized, numpy_choice, shard_inputs, torch_dtype


class Collective:
    """A collective a generator adapter yields: `result = yield Collective(...)`.

    op: "all_gather_object" (payload: any object; result: every member's, in group-rank
    order), "all_gather" (payload: a tensor of one shape on every member; result: the
    list of tensors), "all_reduce" (payload: a tensor; `reduce_op` "sum" or "max";
    result: the reduced tensor, written into the payload as torch.distributed does).
    group: None for the world, or a group from RankContext.dp_group.
    shared: the adapter only reads what it receives (gathers): the in-process runtime may
    hand every member the senders' own objects instead of a copy each (tensors must be
    detached: no receiver may reach a sender's graph). Real DDP ignores it.
    """

    __slots__ = ("op", "payload", "group", "reduce_op", "shared")

    def __init__(self, op, payload, group=None, reduce_op="sum", shared=False):
        assert op in ("all_gather_object", "all_gather", "all_reduce"), op
        self.op, self.payload, self.group, self.reduce_op = op, payload, group, reduce_op
        self.shared = shared


class RankContext:
    """One rank's view of one case (what an adapter receives, see python/README.md)."""

    def __init__(self, case, world_rank, model, dp_group, replays_draws, input_cache=None):
        self.case = case
        self.world = case.world
        self.dp = case.dp
        self.replicas = case.replicas
        self.world_rank = world_rank
        self.dp_rank, self.replica = divmod(world_rank, case.replicas)
        self.dtype = torch_dtype(case)
        self.model = model  # this rank's replica (nn.Linear(F, D, bias=False)), or its DDP wrapper
        self.dp_group = dp_group  # the DP group of this rank's replica index
        self.micro = 0
        self.replays_draws = replays_draws
        self.draws = [[] for _ in range(case.steps)]  # [micro] -> indices drawn, in order
        self.sync_context = lambda last: contextlib.nullcontext()
        self._inputs = {} if input_cache is None else input_cache

    def inputs(self, micro):
        """(rows [q, p, n...] of every group of this rank's DP shard, labels [1, 0 x k] per group)."""
        key = (micro, self.dp_rank)
        if key not in self._inputs:
            self._inputs[key] = shard_inputs(self.case, micro, self.dp_rank, self.dtype)
        return self._inputs[key]

    def encode(self, x):
        model = self.model
        # The in-process replica: what model(x) would run (Module.__call__'s path without
        # hooks, then Linear.forward), without that Python layer; a DDP wrapper, a module
        # with a hook or a bias goes through model(x).
        if type(model) is torch.nn.Linear and model.bias is None and not (
                model._forward_hooks or model._forward_pre_hooks or model._backward_hooks
                or _module._global_forward_hooks or _module._global_forward_pre_hooks
                or _module._global_backward_hooks):
            e = F.linear(x, model.weight)
        else:
            e = model(x)
        return normalized(e, self.case.normalize)

    def padding_stream(self):
        """This micro-step's padding draws: the case's (replayed) or numpy's global generator."""
        use_case = self.replays_draws and self.case.padding_draws is not None
        stream = DrawStream(self.case if use_case else _NO_DRAWS, self.micro, self.dp_rank,
                            generator=numpy_choice)
        stream.taken = self.draws[self.micro]
        return stream

    def replayed_draws(self):
        """The case's recorded draws for this rank's stream and micro-step, or None."""
        if not self.replays_draws or self.case.padding_draws is None:
            return None
        return self.case.padding_draws[self.micro][self.dp_rank]


class _NoDraws:
    padding_draws = None


_NO_DRAWS = _NoDraws()


def is_generator_adapter(adapter):
    return inspect.isgeneratorfunction(adapter.loss)


def seed_value(case, world_rank):
    """`synced`: every rank seeds with `seed`; `per-rank`: rank w with `seed + w`."""
    seed = case.rng_seed
    return seed if case.rng_mode == "synced" else seed + world_rank


def rank_program(adapter, ctx, agree_on_failure=None, backward=None, generator=None):
    """One rank's whole step (a generator yielding Collectives); returns the reported loss.

    agree_on_failure(failed) -> generator returning whether any rank failed: under real
    DDP every rank must know before anyone enters DDP's backward collectives.
    backward(micro, scalar): the runtime backpropagates the micro-step's scalar (later, in
    micro-step order); without it the program calls scalar.backward() itself.
    generator: is_generator_adapter(adapter), when the caller knows it.
    """
    if generator is None:
        generator = is_generator_adapter(adapter)

    def micro_loss(micro):
        x, labels = ctx.inputs(micro)
        embeddings = ctx.encode(x)
        if generator:
            return (yield from adapter.loss(ctx, embeddings, labels))
        return adapter.loss(ctx, embeddings, labels)

    return (yield from micro_step_loop(ctx, micro_loss, agree_on_failure, backward))


def micro_step_loop(ctx, micro_loss, agree_on_failure=None, backward=None, tie=None):
    """The micro-step loop every rank program shares (rank_program, families.py): for each
    micro-step, micro_loss(micro) (a generator returning the loss, or the pair
    (backpropagated, reported)), the failure agreement, GA's 1 / A, the backward of the
    loss (plus tie(), a zero that ties every parameter into the graph, where given), and
    the reported values summed. Arguments as rank_program's."""
    case = ctx.case
    divisor = case.steps if case.ga_normalize else 1
    reported = 0.0
    for micro in range(case.steps):
        ctx.micro = micro
        last = micro == case.steps - 1
        with ctx.sync_context(last):
            error = None
            loss = value = None
            try:
                loss = yield from micro_loss(micro)
                # (signal, value): backpropagate the first, report the second
                loss, value = loss if isinstance(loss, tuple) else (loss, loss)
                _check_loss(loss)
                _check_loss(value)
            except Exception as e:  # noqa: BLE001 - reported as the step's error
                if agree_on_failure is None:
                    raise
                error = e
            if agree_on_failure is not None:
                failed = yield from agree_on_failure(error is not None)
                if error is not None:
                    raise error
                if failed:
                    raise StepFailed("another rank failed")
            if divisor != 1:  # (x / 1 is x, bit for bit, and so is its gradient)
                scaled = loss / divisor  # reported: the same quotient, once (no second div)
                value = scaled if value is loss else value.detach() / divisor
                loss = scaled
            signal = loss if tie is None else loss + tie()
            if backward is not None:
                backward(micro, signal)
            else:
                signal.backward()
            reported += value.item()  # (read, not backpropagated: no detach needed)
    return reported


class StepFailed(Exception):
    pass


def _check_loss(loss):
    if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
        raise StepFailed(f"the adapter's loss must be a scalar tensor, got {type(loss).__name__}"
                         + (f" of shape {list(loss.shape)}" if isinstance(loss, torch.Tensor)
                            else ""))


def drive(program, fulfil):
    """Run a rank program, answering every Collective it yields with fulfil(collective)."""
    value = None
    while True:
        try:
            request = program.send(value)
        except StopIteration as stop:
            return stop.value
        value = fulfil(request)
