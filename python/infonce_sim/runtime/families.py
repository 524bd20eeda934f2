"""The runtime side of issue 13's case keys: the step of a case that has a `strategy`, a
`learnable_temperature` or a `family` other than InfoNCE (clip, ntxent, siglip; a case
without them runs the unchanged program of rank.py; `of(case)` tells which).

What differs from rank.py's program:
  * the replica holds more parameters: InfoNCE's inverse temperature tau (an
    nn.Parameter initialised to 1 / loss.temperature), or CLIP's two towers, its log
    logit scale and optional logit bias (ClipReplica), or SigLIP's two towers, log scale
    and optional bias (SiglipReplica); every one is reduced like the
    encoder (mean over the W ranks or sum over the DP group, after the last micro-step),
    and the response carries the direct parameters' gradients under "direct";
  * every parameter of the replica is tied into each micro-step's backward with weight
    0 (`0 * p.sum()`): a parameter the strategy detaches (the encoders under a detached
    global gather) gets a zero gradient instead of none, so DDP reduces every bucket and
    the in-process runtime reports 0, as docs/MODEL.md section 3.7 says. Adding 0 changes
    no gradient value that flows (at most a -0.0 becomes 0.0);
  * the context offers `ctx.autograd_gather(tensor, group)` (a generator: `slots =
    yield from ctx.autograd_gather(x, ctx.dp_group)`): every member's tensor, each slot
    differentiable, its gradient summed over the ranks and returned to its owner
    (torch.distributed.nn.all_gather's semantics). Under real DDP it is _GatherWithGrad
    (all_gather, and an all_reduce of the slots' gradients in the backward); in thread
    mode torch's own torch.distributed.nn.all_gather on the in-process backend; for a generator adapter
    in-process, the slots are the members' own live tensors, so the one backward call of
    the micro-step (every rank's signal at once) sums each slot's gradient over the ranks.
    The tensors must have one shape on every member (pad first, see strategic.py);
  * CLIP: the adapter's `clip_loss(ctx, image, text, logit_scale, logit_bias)` replaces
    `loss(ctx, embeddings, labels)`; NT-Xent: `ntxent_loss(ctx, first, second)`; SigLIP:
    `siglip_loss(ctx, image, text)`, the parameters `ctx.log_scale` and `ctx.bias`
    (python/README.md).
"""

import inspect

import torch
import torch.nn.functional as F

from ..cases.spec import normalized, torch_dtype
from . import backend
from .inprocess import RandomStates, backward_scalars, blocking_fulfil, reduce_gradients
from .rank import Collective, RankContext, StepFailed, drive, micro_step_loop


TWO_TOWERS = ("clip", "siglip")  # the families whose replica is two towers (image, text)
ENTRY_POINTS = {"clip": ("clip_loss", "CLIP"), "ntxent": ("ntxent_loss", "NT-Xent"),
                "siglip": ("siglip_loss", "SigLIP")}


def of(case):
    """The family of a case that needs this module's program, or None (rank.py's program)."""
    if case.family in ENTRY_POINTS:
        return case.family
    if case.strategy is not None or case.learnable_temperature:
        return "infonce"
    return None


def loss_function(adapter, case):
    """The adapter's entry point for the case's family."""
    if case.family in ENTRY_POINTS:
        name, family = ENTRY_POINTS[case.family]
        function = getattr(adapter, name, None)
        if function is None:
            raise StepFailed(f"the adapter has no {name}: it does not run the {family} family")
        return function
    return adapter.loss


def is_generator(adapter, case):
    return inspect.isgeneratorfunction(loss_function(adapter, case))


# --------------------------------------------------------------------------------------
# Replicas and contexts
# --------------------------------------------------------------------------------------


def _add_towers(module, case, dtype):
    """A two-tower replica's towers: each its weight (a parameter) and its normalisation."""
    module.image_normalize = case.image_normalize
    module.text_normalize = case.text_normalize
    module.image_weight = torch.nn.Parameter(torch.tensor(case.image_weight, dtype=dtype))
    module.text_weight = torch.nn.Parameter(torch.tensor(case.text_weight, dtype=dtype))


class ClipReplica(torch.nn.Module):
    """One rank's CLIP parameters: two towers (e = W x, optional L2 normalisation), the log
    logit scale (a parameter, as CLIP stores it) and the optional logit bias."""

    def __init__(self, case, dtype):
        super().__init__()
        _add_towers(self, case, dtype)
        self.log_logit_scale = torch.nn.Parameter(torch.tensor(case.log_logit_scale,
                                                               dtype=dtype))
        if case.logit_bias is None:
            self.logit_bias = None
        else:
            self.logit_bias = torch.nn.Parameter(torch.tensor(case.logit_bias, dtype=dtype))

    def forward(self, x_image, x_text):
        image = normalized(F.linear(x_image, self.image_weight), self.image_normalize)
        text = normalized(F.linear(x_text, self.text_weight), self.text_normalize)
        return image, text, self.log_logit_scale.exp()

    def named_direct(self):
        out = {"log_logit_scale": self.log_logit_scale}
        if self.logit_bias is not None:
            out["logit_bias"] = self.logit_bias
        return out


class SiglipReplica(torch.nn.Module):
    """One rank's SigLIP parameters: two towers (as ClipReplica), the log scale and the
    bias, both learnable (SPEC section 15)."""

    def __init__(self, case, dtype):
        super().__init__()
        _add_towers(self, case, dtype)
        self.log_scale = torch.nn.Parameter(torch.tensor(case.log_scale, dtype=dtype))
        self.bias = torch.nn.Parameter(torch.tensor(case.bias, dtype=dtype))

    def forward(self, x_image, x_text):
        return (normalized(F.linear(x_image, self.image_weight), self.image_normalize),
                normalized(F.linear(x_text, self.text_weight), self.text_normalize))

    def named_direct(self):
        return {"log_scale": self.log_scale, "bias": self.bias}


def two_tower_replica(case, dtype):
    """(module, encoders, direct) of a CLIP or SigLIP rank: the replica, its towers by name,
    its direct parameters by name."""
    module = (ClipReplica if case.family == "clip" else SiglipReplica)(case, dtype)
    return (module, {"image_weight": module.image_weight, "text_weight": module.text_weight},
            module.named_direct())


class FamilyContext(RankContext):
    """RankContext plus the replica's parameters, tau and the autograd gather."""

    def __init__(self, case, world_rank, model, dp_group, replays_draws, input_cache,
                 encoders, direct):
        super().__init__(case, world_rank, model, dp_group, replays_draws, input_cache)
        self.encoders = encoders  # name -> the replica's encoder Parameter (not DDP's)
        self.direct = direct  # name -> the replica's direct Parameter
        self.inverse_temperature = direct.get("inverse_temperature")
        self.autograd_gather = None  # set by the runtime

    def parameters(self):
        return list(self.encoders.values()) + list(self.direct.values())

    def zero_tie(self):
        """0 * every parameter: each one is in the backward's graph (see the module doc)."""
        tie = None
        for p in self.parameters():
            term = p.sum() * 0.0
            tie = term if tie is None else tie + term
        return tie

    def family_loss(self, adapter, generator):
        x, labels = self.inputs(self.micro)
        embeddings = self.encode(x)
        if generator:
            return (yield from adapter.loss(self, embeddings, labels))
        return adapter.loss(self, embeddings, labels)


class _PairContext(FamilyContext):
    """A rank whose shard's batch is a pair of feature rows (CLIP's and SigLIP's towers,
    NT-Xent's two views): `inputs(micro)` is that pair as tensors of the case's dtype."""

    def inputs(self, micro):
        key = (micro, self.dp_rank)
        if key not in self._inputs:
            left, right = self.case.batches[micro][self.dp_rank]
            self._inputs[key] = (torch.tensor(left, dtype=self.dtype),
                                 torch.tensor(right, dtype=self.dtype))
        return self._inputs[key]


class ClipContext(_PairContext):
    """A CLIP rank: `inputs(micro)` is (image features n x F_image, text features n x F_text)."""

    @property
    def logit_bias(self):
        return self.direct.get("logit_bias")

    def family_loss(self, adapter, generator):
        x_image, x_text = self.inputs(self.micro)
        image, text, logit_scale = self.model(x_image, x_text)
        if generator:
            return (yield from adapter.clip_loss(self, image, text, logit_scale,
                                                 self.logit_bias))
        return adapter.clip_loss(self, image, text, logit_scale, self.logit_bias)


class NtXentContext(_PairContext):
    """An NT-Xent rank: `inputs(micro)` is (first views n x F, second views n x F), both
    encoded by the one replica; `ntxent_loss(ctx, first, second)` gets the embeddings (the
    temperature: ctx.case.temperature, or the parameter ctx.inverse_temperature)."""

    def family_loss(self, adapter, generator):
        x_first, x_second = self.inputs(self.micro)
        first, second = self.encode(x_first), self.encode(x_second)
        if generator:
            return (yield from adapter.ntxent_loss(self, first, second))
        return adapter.ntxent_loss(self, first, second)


class SiglipContext(ClipContext):
    """A SigLIP rank: `inputs(micro)` as ClipContext's; `siglip_loss(ctx, image, text)` gets
    the towers' outputs for this shard's pairs (row i of each is pair i); the learnable
    parameters are `ctx.log_scale` (0-d; logits are exp(log_scale) a.b + bias) and
    `ctx.bias` (0-d)."""

    @property
    def log_scale(self):
        return self.direct["log_scale"]

    @property
    def bias(self):
        return self.direct["bias"]

    def family_loss(self, adapter, generator):
        x_image, x_text = self.inputs(self.micro)
        image, text = self.model(x_image, x_text)
        if generator:
            return (yield from adapter.siglip_loss(self, image, text))
        return adapter.siglip_loss(self, image, text)


def context_class(case):
    """The rank context of a case's family."""
    return {"clip": ClipContext, "ntxent": NtXentContext,
            "siglip": SiglipContext}.get(case.family, FamilyContext)


def inverse_temperature_parameter(case, dtype):
    temperature = case.temperature if case.family == "ntxent" else case.loss.temperature
    return torch.nn.Parameter(torch.tensor(1.0 / temperature, dtype=dtype))


# --------------------------------------------------------------------------------------
# The rank program
# --------------------------------------------------------------------------------------


def family_rank_program(adapter, ctx, agree_on_failure=None, backward=None):
    """rank.py's rank_program for these cases (same arguments): forward, the adapter's loss,
    backward of loss / A plus the zero tie (backward(micro, scalar): the runtime runs it
    later; without it the program does), reported values summed."""
    generator = is_generator(adapter, ctx.case)
    return (yield from micro_step_loop(ctx, lambda micro: ctx.family_loss(adapter, generator),
                                       agree_on_failure, backward, tie=ctx.zero_tie))


def torch_autograd_gather(tensor, group):
    """In-process thread mode: torch's own torch.distributed.nn.all_gather (forward and
    backward) on the in-process backend. Imported here, when an adapter asks for it, never
    before: a trainer that uses torch.distributed.nn without importing it must fail."""
    import torch.distributed.nn  # noqa: F401 - the module whose all_gather is looked up

    return list(torch.distributed.nn.all_gather(tensor, group=group))
    yield  # noqa: unreachable - a generator for `yield from`


class _GatherWithGrad(torch.autograd.Function):
    """Real DDP: all_gather forward; backward all-reduces every slot's gradient over the
    group and keeps the own slot (the sum over the ranks of its gradient).

    Not torch.distributed.nn.all_gather: in torch 1.13 its gloo backward scatters with the
    group rank as the global source rank, which fails on a DP subgroup (replicas)."""

    @staticmethod
    def forward(ctx, group, tensor):
        import torch.distributed as dist
        ctx.group = group
        ctx.member = dist.get_rank(group=group)
        out = [torch.empty_like(tensor) for _ in range(dist.get_world_size(group=group))]
        dist.all_gather(out, tensor.contiguous(), group=group)
        return tuple(out)

    @staticmethod
    def backward(ctx, *grads):
        import torch.distributed as dist
        like = next(g for g in grads if g is not None)
        stacked = torch.stack([torch.zeros_like(like) if g is None else g for g in grads])
        dist.all_reduce(stacked, group=ctx.group)
        return None, stacked[ctx.member]


def ddp_autograd_gather(tensor, group):
    """Real DDP: every member's tensor, differentiable (_GatherWithGrad)."""
    return list(_GatherWithGrad.apply(group, tensor))
    yield  # noqa: unreachable - a generator for `yield from`


def _registry_gather(registry, ctx):
    """In-process generator mode: every member's live tensor (see the module doc)."""

    def gather(tensor, group):
        token = (ctx.world_rank, len(registry))
        registry[token] = tensor
        tokens = yield Collective("all_gather_object", token, group)
        return [registry[t] for t in tokens]

    return gather


# --------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------


def _encoder_gradient(case, grads):
    """The response's `grad`: InfoNCE's D x F; CLIP's and SigLIP's image columns, then the
    text ones."""
    if case.family in TWO_TOWERS:
        return torch.cat([grads["image_weight"], grads["text_weight"]], dim=1)
    return grads["weight"]


def result_of(case, losses, per_rank_grads, reduce):
    """{losses, grad, grads, direct, directs, padding_draws} from every rank's local grads.

    per_rank_grads: [world rank] -> name -> tensor or None; reduce(case, [tensor or None])
    -> [world rank] reduced (in-process), or None when the gradients are already reduced.
    """
    names = list(per_rank_grads[0])
    reduced = {}
    for name in names:
        grads = [g[name] for g in per_rank_grads]
        reduced[name] = reduce(case, grads) if reduce is not None else grads
    ranks = range(case.world)
    encoders = [_encoder_gradient(case, {n: reduced[n][w] for n in names}) for w in ranks]
    direct_names = [n for n in names if n in ("inverse_temperature", "log_logit_scale",
                                              "logit_bias", "log_scale", "bias")]
    directs = [{n: float(reduced[n][w]) for n in direct_names} for w in ranks]
    return {
        "losses": losses,
        "grad": encoders[0],
        "grads": encoders,
        "direct": directs[0] if direct_names else None,
        "directs": directs if direct_names else None,
        "padding_draws": None,
    }


# --------------------------------------------------------------------------------------
# The in-process runtime
# --------------------------------------------------------------------------------------


def run_inprocess(runtime, adapter, case, replays_draws=True):
    """InProcessRuntime.run for these cases (see inprocess_runtime.py)."""
    world = runtime.world(case.world)
    for rank in world.ranks:
        rank.reset()
    world._seed_rng(case, getattr(adapter, "random_generators", RandomStates.GENERATORS))
    dtype = torch_dtype(case)
    inputs = {}
    contexts = []
    models = (None if case.family in TWO_TOWERS
              else world.replicas(torch.tensor(case.weight, dtype=dtype)))
    for w in range(case.world):
        group = world.dp_group(case, w % case.replicas)
        if case.family in TWO_TOWERS:
            replica, encoders, direct = two_tower_replica(case, dtype)
            ctx = context_class(case)(case, w, replica, group, replays_draws, inputs,
                                      encoders, direct)
        else:
            model = models[w]
            direct = ({"inverse_temperature": inverse_temperature_parameter(case, dtype)}
                      if case.learnable_temperature else {})
            ctx = context_class(case)(case, w, model, group, replays_draws, inputs,
                                      {"weight": model.weight}, direct)
        contexts.append(ctx)
    threaded = not is_generator(adapter, case)
    if threaded:
        def blocking(ctx):
            def run():
                backend.bind_thread(world, ctx)
                return drive(family_rank_program(adapter, ctx), blocking_fulfil(world))
            return run

        for ctx in contexts:
            ctx.autograd_gather = torch_autograd_gather
        with backend.installed(world):
            losses = world.run_ranks([blocking(ctx) for ctx in contexts], threaded=True)
    else:
        # As inprocess.py: every micro-step's backward after every rank's last one, one
        # autograd call per micro-step for all ranks (an autograd gather joins their graphs:
        # the call then sums each slot's gradient over the ranks).
        registry = {}
        roots = [[None] * case.world for _ in range(case.steps)]

        def defer(ctx):
            def backward(micro, scalar):
                roots[micro][ctx.world_rank] = scalar
            return backward

        for ctx in contexts:
            ctx.autograd_gather = _registry_gather(registry, ctx)
        losses = world.run_ranks([family_rank_program(adapter, ctx, backward=defer(ctx))
                                  for ctx in contexts], threaded=False)
        for micro_roots in roots:
            backward_scalars(micro_roots)
        registry.clear()
    per_rank = [{name: p.grad for name, p in {**ctx.encoders, **ctx.direct}.items()}
                for ctx in contexts]
    out = result_of(case, losses, per_rank, reduce_gradients)
    if case.family == "infonce":
        out["padding_draws"] = [[ctx.draws[m] for ctx in contexts] for m in range(case.steps)]
    return out
