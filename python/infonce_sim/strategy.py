"""The `strategy` case key (docs/MODEL.md section 3.7, docs/strategies.md): parsing and
the point a case runs at. No torch needed.

A point is four fields: gather (`detached-own-live`, `detached`, `autograd`), scope
(`global`, `local`), scale (`none`, `P`, `W`: the factor s on the backward signal) and
reduction (`mean`, `sum`, always the case's `reduction`). Without the key a case runs the
trainer's point: detached-own-live/global, scale P exactly where the fix compensates
(`compensate`, use_batch, reduction mean), else scale 1.
"""

import dataclasses

GATHERS = ("detached-own-live", "detached", "autograd")
SCOPES = ("global", "local")
SCALES = ("none", "P", "W")
REDUCTIONS = ("mean", "sum")


class StrategyError(ValueError):
    """A bad `strategy` value (the message names the key)."""


@dataclasses.dataclass(frozen=True)
class Strategy:
    gather: str
    scope: str
    scale: str
    reduction: str

    def factor(self, dp: int, world: int) -> int:
        """s: the backward signal's factor."""
        return {"none": 1, "P": dp, "W": world}[self.scale]

    def point(self) -> str:
        """The point's name as docs/strategies.md writes it, e.g. autograd/local/scale-P/mean."""
        scale = {"none": "scale-1", "P": "scale-P", "W": "scale-W"}[self.scale]
        return f"{self.gather}/{self.scope}/{scale}/{self.reduction}"


def parse_strategy(value: object, reduction: str, compensate: bool) -> "Strategy | None":
    """The case's `strategy` value (None for absent or null); errors name the key."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise StrategyError("strategy: expected an object or null")
    for key in value:
        if key not in ("gather", "scope", "scale", "reduction"):
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
    if not compensate:
        raise StrategyError("strategy: with a strategy, compensate must be true")
    return Strategy(reduction=own_reduction, **fields)


def effective_strategy(case) -> Strategy:
    """The point `case` runs at: its `strategy`, or the trainer's."""
    if case.strategy is not None:
        return case.strategy
    use_batch = case.family == "clip" or case.loss.use_batch
    compensates = case.compensate and use_batch and case.reduction == "mean"
    return Strategy("detached-own-live", "global", "P" if compensates else "none",
                    case.reduction)


def has_gather(case) -> bool:
    """Whether the step gathers (use_batch and P > 1): the only place the strategy's gather
    and scope act (its scale and reduction act always)."""
    use_batch = case.family == "clip" or case.loss.use_batch
    return use_batch and case.dp > 1
