"""The `conformance` adapter: the SPEC's own torch reading (infonce_sim.cases.spec) on one rank.

`--option families=infonce,clip,ntxent,siglip` declares the families it runs beyond the
default infonce and clip (NT-Xent and SigLIP: strategic.py, at every strategy point).

`--option strategy=POINT` (e.g. detached/local/scale-1/mean, or with /world appended a
gather over the whole world: detached-own-live/global/scale-W/mean/world, a tevatron-like
trainer) makes it a trainer with one point baked in: it runs POINT whatever point a case names, and declines a case whose
reduction is not POINT's (its DDP reduction is the case's). `check --strategies OTHER --sut`
must then fail wherever OTHER's step differs from POINT's.

Written as a generator: it yields its collectives (Collective), so the in-process
runtime runs it without threads and real DDP fulfils them with torch.distributed.
"""

import dataclasses

import torch

from ..cases.spec import compensation_scale, infonce_loss
from ..cases.strategy import GATHERS, REDUCTIONS, SCOPES, Strategy
from ..runtime.gathers import gather_objects, gather_tensors
from ..runtime.strategic import (clip_strategy_loss, infonce_strategy_loss,
                                 ntxent_strategy_loss, siglip_strategy_loss)

FAMILIES = ("infonce", "clip", "ntxent", "siglip")  # what it runs (--option families=)
SUPPORTS = {
    "use_batch": [True, False],
    "hard_negatives": True,
    "padding": ["legacy", "fixed"],
    "mask_fake_negative": True,
    "include_qq": True,
    "include_dd": True,
    "reductions": ["mean", "sum"],
    "gathers": ["object", "tensor"],
    "dtypes": ["float64", "float32"],
    "max_world": 8,
    "max_replicas": 8,
    "compensate_false": True,
    "accumulation_normalize": [True, False],
    "rng_modes": ["synced", "per-rank"],
    "replays_padding_draws": True,
    "extension_keys": ["dtype", "accumulation.window", "strategy", "learnable_temperature",
                       "family"],
    "families": ["infonce", "clip"],
    "logit_bias": True,
}


def gather_over_dp_group(ctx, embeddings, labels):
    """Every DP rank's embeddings and labels in slot order; own live rows in slot dp_rank."""
    gather = gather_objects if ctx.case.gather == "object" else gather_tensors
    # (what is gathered is detached: the senders send detached tensors, or copies of them)
    slots, all_labels = yield from gather((embeddings.detach(), labels), ctx.dp_group)
    slots = list(slots)
    slots[ctx.dp_rank] = embeddings
    return torch.cat(slots, dim=0), torch.cat(all_labels, dim=0)


class ConformanceAdapter:
    name = "conformance: the SPEC's torch reading (infonce_sim.cases.spec)"
    # The only generator its code draws from: numpy's global one (hard-negative padding,
    # spec.numpy_choice). The in-process runtime keeps just that one per rank.
    random_generators = ("numpy",)

    def __init__(self, max_world=8, max_replicas=8, strategy=None, families=None):
        self.supports = dict(SUPPORTS, max_world=max_world, max_replicas=max_replicas)
        if families is not None:
            self.supports["families"] = _families(families)
        self.point = parse_point(strategy) if strategy else None
        if self.point is not None:
            self.name = f"{self.name}, always at {self.point.point()}"
            keys = [key for key in SUPPORTS["extension_keys"] if key != "strategy"]
            self.supports["extension_keys"] = keys  # it runs its own point, not the case's

    def decline(self, case):
        if self.point is not None and case.reduction != self.point.reduction:
            return f"this trainer reduces by {self.point.reduction}, the case by {case.reduction}"
        return None

    def prepare(self, case):
        """The case as this trainer runs it: at its own point, when it has one."""
        if self.point is None:
            return case
        return dataclasses.replace(case, strategy=self.point)

    def loss(self, ctx, embeddings, labels):
        if ctx.case.strategy is not None or ctx.case.learnable_temperature:  # issue 13's keys
            return (yield from infonce_strategy_loss(ctx, embeddings, labels))
        if ctx.case.loss.use_batch and ctx.dp > 1:
            embeddings, labels = yield from gather_over_dp_group(ctx, embeddings, labels)
        loss = infonce_loss(embeddings, labels, ctx.case.loss, ctx.padding_stream())
        scale = compensation_scale(ctx.case)
        if scale == 1:
            return loss
        # SPEC section 3: backpropagate s * L, report L itself (also when L is not finite)
        return loss * scale, loss

    def clip_loss(self, ctx, image, text, logit_scale, logit_bias):
        return (yield from clip_strategy_loss(ctx, image, text, logit_scale, logit_bias))

    def ntxent_loss(self, ctx, first, second):
        return (yield from ntxent_strategy_loss(ctx, first, second))

    def siglip_loss(self, ctx, image, text):
        return (yield from siglip_strategy_loss(ctx, image, text))


def parse_point(text):
    """'gather/scope/scale-S/reduction[/world]' (docs/strategies.md) as a Strategy: a
    trailing /world gathers over the default (world) group, every shard R times."""
    scales = {"scale-1": "none", "scale-P": "P", "scale-W": "W"}
    parts = text.split("/")
    group = "dp"
    if len(parts) == 5 and parts[4] == "world":
        group = "world"
        parts = parts[:4]
    if (len(parts) != 4 or parts[0] not in GATHERS or parts[1] not in SCOPES
            or parts[2] not in scales or parts[3] not in REDUCTIONS):
        raise ValueError(f"--option strategy={text}: expected "
                         "GATHER/SCOPE/scale-1|P|W/mean|sum[/world], "
                         "e.g. autograd/local/scale-P/mean or "
                         "detached-own-live/global/scale-W/mean/world")
    return Strategy(parts[0], parts[1], scales[parts[2]], parts[3], group)


def _families(text):
    """--option families=infonce,clip,ntxent,siglip: the families it declares (default
    infonce and clip; it runs all four, SPEC sections 2, 11, 14 and 15)."""
    names = [name for name in str(text).split(",") if name]
    unknown = [name for name in names if name not in FAMILIES]
    if unknown or not names:
        raise ValueError(f"--option families={text}: expected some of {', '.join(FAMILIES)}")
    return names


def make(max_world=8, max_replicas=8, strategy=None, families=None, **_):
    return ConformanceAdapter(int(max_world), int(max_replicas), strategy, families)
