"""The `strategy` case key (docs/MODEL.md section 3.7, docs/strategies.md): parsing and
the point a case runs at. No torch needed.

A point is five fields: gather (`detached-own-live`, `detached`, `autograd`), scope
(`global`, `local`), scale (`none`, `P`, `W`: the factor s on the backward signal),
reduction (`mean`, `sum`, always the case's `reduction`) and the gather's group (`dp`, the
default, or `world`: every rank, each shard R times; SPEC section 13). Without the key a case runs the
trainer's point: detached-own-live/global, scale P exactly where the fix compensates
(`compensate`, use_batch, reduction mean), else scale 1.
"""

import dataclasses

GATHERS = ("detached-own-live", "detached", "autograd")
SCOPES = ("global", "local")
SCALES = ("none", "P", "W")
REDUCTIONS = ("mean", "sum")
GROUPS = ("dp", "world")


class StrategyError(ValueError):
    """A bad `strategy` value (the message names the key)."""


@dataclasses.dataclass(frozen=True)
class Strategy:
    gather: str
    scope: str
    scale: str
    reduction: str
    group: str = "dp"

    def factor(self, dp: int, world: int) -> int:
        """s: the backward signal's factor."""
        return {"none": 1, "P": dp, "W": world}[self.scale]

    def point(self) -> str:
        """The point's name as docs/strategies.md writes it, e.g. autograd/local/scale-P/mean
        (a world point's adds /world)."""
        scale = {"none": "scale-1", "P": "scale-P", "W": "scale-W"}[self.scale]
        suffix = "/world" if self.group == "world" else ""
        return f"{self.gather}/{self.scope}/{scale}/{self.reduction}{suffix}"


def parse_strategy(value: object, reduction: str, compensate: bool) -> "Strategy | None":
    """The case's `strategy` value (None for absent or null); errors name the key."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise StrategyError("strategy: expected an object or null")
    for key in value:
        if key not in ("gather", "scope", "scale", "reduction", "group"):
            raise StrategyError(f"strategy.{key}: unknown key")
    fields = {}
    for key, choices in (("gather", GATHERS), ("scope", SCOPES), ("scale", SCALES)):
        if key not in value:
            raise StrategyError(f"strategy.{key}: missing")
        if value[key] not in choices:
            raise StrategyError(f"strategy.{key}: expected one of {', '.join(choices)}")
        fields[key] = value[key]
    own_reduction = value.get("reduction")
    if own_reduction is None:
        own_reduction = reduction
    if own_reduction not in REDUCTIONS:
        raise StrategyError(f"strategy.reduction: expected one of {', '.join(REDUCTIONS)}")
    if own_reduction != reduction:
        raise StrategyError(f"strategy.reduction: {own_reduction} differs from the case's "
                            f"reduction {reduction}")
    group = value.get("group")
    if group is None:
        group = "dp"
    if group not in GROUPS:
        raise StrategyError(f"strategy.group: expected one of {', '.join(GROUPS)}")
    if not compensate:
        raise StrategyError("strategy: with a strategy, compensate must be true")
    return Strategy(reduction=own_reduction, group=group, **fields)


def effective_strategy(case) -> Strategy:
    """The point `case` runs at: its `strategy`, or the trainer's (SigLIP's, SPEC section 15:
    every rank's texts reach each rank with their gradients' way back, its own images score
    against all of them, divided by its own pairs: autograd/local/scale-1)."""
    if case.strategy is not None:
        return case.strategy
    if case.family == "siglip":
        return Strategy("autograd", "local", "none", case.reduction)
    use_batch = case.family != "infonce" or case.loss.use_batch
    compensates = case.compensate and use_batch and case.reduction == "mean"
    return Strategy("detached-own-live", "global", "P" if compensates else "none",
                    case.reduction)


def has_gather(case) -> bool:
    """Whether the step gathers (use_batch and more than one member in the gather's group:
    P, or W for a world gather): the only place the strategy's gather and scope act (its
    scale and reduction act always)."""
    use_batch = case.family != "infonce" or case.loss.use_batch  # only InfoNCE may not
    members = case.world if effective_strategy(case).group == "world" else case.dp
    return use_batch and members > 1


def gather_group(ctx):
    """(the torch group the strategy's gather runs over, the rank's slot in it): the DP
    group and the DP rank, or the default (world) group (None) and the world rank."""
    if effective_strategy(ctx.case).group == "world":
        return None, ctx.world_rank
    return ctx.dp_group, ctx.dp_rank
