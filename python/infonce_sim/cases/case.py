"""Case files (`infonce-case/1`, SPEC section 7): parsing and validation, no torch needed.

Every error names the key (CaseError); the worker answers such a request with an error.
"""

import dataclasses
import math

from .strategy import StrategyError, parse_strategy


class CaseError(Exception):
    """Bad input (the case file, or a step the SPEC defines as an input error)."""


class NeedsPaddingDraws(Exception):
    """The case pads hard negatives but records no padding_draws."""


# --------------------------------------------------------------------------
# Case file (SPEC section 7)
# --------------------------------------------------------------------------


@dataclasses.dataclass
class LossSettings:
    temperature: float
    use_batch: bool
    hard_negatives: object  # None or int >= 1
    padding: str  # "legacy" | "fixed"
    mask_fake_negative: bool
    fake_neg_margin: float
    include_qq: bool
    include_dd: bool


class MeshShape:
    """What every family's case derives from its mesh (`world` and `dp` fields)."""

    @property
    def replicas(self) -> int:
        return self.world // self.dp


@dataclasses.dataclass
class Case(MeshShape):
    world: int
    dp: int
    reduction: str
    gather: str
    compensate: bool
    loss: LossSettings
    normalize: bool
    weight: list  # D x F
    steps: int
    ga_normalize: bool
    rng_mode: str
    rng_seed: int
    padding_draws: object  # None or [micro][dp rank][draw]
    batches: list  # [micro][dp rank][group][row][F]
    expect: object  # None or dict(loss, grad, rtol?, atol?)
    dtype: str
    # accumulation.window (docs/MODEL.md): `steps` above is the window, the
    # micro-steps that run; the case file holds this many more, all empty.
    empty_tail_steps: int = 0
    # Issue 13's keys (MODEL.md 3.7): None / False / "infonce" when absent.
    strategy: object = None  # None or strategy.Strategy
    learnable_temperature: bool = False
    family: str = "infonce"


def _check_keys(obj, where, required, optional=()):
    if not isinstance(obj, dict):
        raise CaseError(f"{where}: expected an object")
    for key in obj:
        if key not in required and key not in optional:
            raise CaseError(f"{where}{key}: unknown key")
    for key in required:
        if key not in obj:
            raise CaseError(f"{where}{key}: missing")


def _bool(value, key):
    if not isinstance(value, bool):
        raise CaseError(f"{key}: expected true or false")
    return value


def _int(value, key, low, high=None):
    if isinstance(value, bool) or not isinstance(value, int):
        raise CaseError(f"{key}: expected an integer")
    if value < low or (high is not None and value > high):
        raise CaseError(f"{key}: {value} out of range")
    return value


def _number(value, key, finite=True):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise CaseError(f"{key}: expected a number")
    if finite and not math.isfinite(value):
        raise CaseError(f"{key}: must be finite")
    return float(value)


def _choice(value, key, choices):
    if value not in choices:
        raise CaseError(f"{key}: expected one of {', '.join(choices)}")
    return value


def _list(value, key, length=None):
    if not isinstance(value, list):
        raise CaseError(f"{key}: expected a list")
    if length is not None and len(value) != length:
        raise CaseError(f"{key}: expected {length} entries, got {len(value)}")
    return value


_NUMBER_TYPES = frozenset((int, float))


def _rows_valid(rows, width, min_rows=1):
    """Fast path: `rows` is a list of >= min_rows lists of `width` finite numbers (no bool).

    Exactly what the checks below accept; anything else (or an error) goes through them,
    which name the offending key."""
    if type(rows) is not list or len(rows) < min_rows:
        return False
    for row in rows:
        if type(row) is not list or len(row) != width or not _NUMBER_TYPES.issuperset(
                map(type, row)):
            return False
    try:  # a sum of finite numbers that is not finite (overflow) goes the slow way
        return math.isfinite(sum(map(sum, rows)))
    except OverflowError:
        return False


def _matrix(value, key, cols=None):
    if type(value) is list and value and type(value[0]) is list:
        width = cols if cols is not None else len(value[0])
        if width > 0 and _rows_valid(value, width):
            return value
    rows = _list(value, key)
    if not rows:
        raise CaseError(f"{key}: empty")
    width = cols if cols is not None else len(_list(rows[0], f"{key}[0]"))
    if width == 0:
        raise CaseError(f"{key}[0]: empty")
    for i, row in enumerate(rows):
        for j, x in enumerate(_list(row, f"{key}[{i}]", width)):
            _number(x, f"{key}[{i}][{j}]")
    return rows


def _parse_format_and_mesh(obj):
    """The format check and (W, P) of the mesh, for every loss family's case."""
    if obj["format"] != "infonce-case/1":
        raise CaseError("format: expected infonce-case/1")
    _check_keys(obj["mesh"], "mesh.", ("world", "dp"))
    world = _int(obj["mesh"]["world"], "mesh.world", 1, 4096)
    dp = _int(obj["mesh"]["dp"], "mesh.dp", 1, world)
    if world % dp:
        raise CaseError(f"mesh.dp: {dp} does not divide mesh.world {world}")
    return world, dp


def _parse_step_keys(obj):
    """The keys every loss family's case has: reduction, gather, compensate, strategy."""
    reduction = _choice(obj["reduction"], "reduction", ("mean", "sum"))
    compensate = _bool(obj["compensate"], "compensate")
    try:
        strategy = parse_strategy(obj.get("strategy"), reduction, compensate)
    except StrategyError as e:
        raise CaseError(str(e)) from e
    return {"reduction": reduction, "gather": _choice(obj["gather"], "gather", ("object", "tensor")),
            "compensate": compensate, "strategy": strategy}


def _parse_loss(obj):
    keys = ("temperature", "use_batch", "hard_negatives", "padding", "mask_fake_negative",
            "fake_neg_margin", "include_qq", "include_dd")
    _check_keys(obj, "loss.", keys)
    temperature = _number(obj["temperature"], "loss.temperature")
    if not temperature > 0:
        raise CaseError(f"loss.temperature: must be > 0, got {temperature}")
    hard = obj["hard_negatives"]
    if hard is not None:
        hard = _int(hard, "loss.hard_negatives", 1)
    return LossSettings(
        temperature=temperature,
        use_batch=_bool(obj["use_batch"], "loss.use_batch"),
        hard_negatives=hard,
        padding=_choice(obj["padding"], "loss.padding", ("legacy", "fixed")),
        mask_fake_negative=_bool(obj["mask_fake_negative"], "loss.mask_fake_negative"),
        fake_neg_margin=_number(obj["fake_neg_margin"], "loss.fake_neg_margin"),
        include_qq=_bool(obj["include_qq"], "loss.include_qq"),
        include_dd=_bool(obj["include_dd"], "loss.include_dd"))


def _parse_row_pairs(value, family, steps, dp, keys, features, meaning):
    """The batches `[A][P] {keys[0]: n x features[0], keys[1]: n x features[1]}` of a
    two-row family (CLIP and SigLIP: image and text; NT-Xent: its two views), row i of
    each being one pair (`meaning`, said in the error)."""
    first_key, second_key = keys
    out = []
    for m, shards in enumerate(_list(value, f"{family}.batches", steps)):
        row = []
        for d, shard in enumerate(_list(shards, f"{family}.batches[{m}]", dp)):
            where = f"{family}.batches[{m}][{d}]"
            _check_keys(shard, f"{where}.", keys)
            first = _matrix(shard[first_key], f"{where}.{first_key}", features[0])
            second = _matrix(shard[second_key], f"{where}.{second_key}", features[1])
            if len(first) != len(second):
                raise CaseError(f"{where}.{second_key}: {len(second)} rows, {first_key} has "
                                f"{len(first)} ({meaning})")
            row.append((first, second))
        out.append(row)
    return out


def _parse_batches(value, steps, dp, features):
    micros = _list(value, "batches", steps)
    for m, shards in enumerate(micros):
        for d, groups in enumerate(_list(shards, f"batches[{m}]", dp)):
            for g, rows in enumerate(_list(groups, f"batches[{m}][{d}]")):
                if _rows_valid(rows, features, 2):
                    continue
                key = f"batches[{m}][{d}][{g}]"
                if len(_list(rows, key)) < 2:
                    raise CaseError(f"{key}: a group needs at least its query and positive rows")
                for i, row in enumerate(rows):
                    for j, x in enumerate(_list(row, f"{key}[{i}]", features)):
                        _number(x, f"{key}[{i}][{j}]")
    return micros


def _parse_draws(value, steps, dp):
    if value is None:
        return None
    micros = _list(value, "padding_draws", steps)
    for m, streams in enumerate(micros):
        for d, draws in enumerate(_list(streams, f"padding_draws[{m}]", dp)):
            for i, j in enumerate(_list(draws, f"padding_draws[{m}][{d}]")):
                _int(j, f"padding_draws[{m}][{d}][{i}]", 0)
    return micros


def _parse_expect(obj, rows, cols):
    if obj is None:
        return None
    _check_keys(obj, "expect.", ("loss", "grad"), ("rtol", "atol"))
    expect = {"loss": _number(obj["loss"], "expect.loss", finite=False)}
    grad = _matrix(obj["grad"], "expect.grad", cols)
    if len(grad) != rows:
        raise CaseError(f"expect.grad: expected {rows} rows, got {len(grad)}")
    expect["grad"] = grad
    for key in ("rtol", "atol"):
        if key in obj:
            expect[key] = _number(obj[key], f"expect.{key}")
    return expect


def parse_infonce_case(obj):
    """An InfoNCE case (Case); case_families.parse_case reads the other families."""
    top = ("format", "mesh", "reduction", "gather", "compensate", "loss", "encoder",
           "accumulation", "rng", "batches")
    # "found" (how a property campaign found the case) is metadata: not read here.
    _check_keys(obj, "", top, ("padding_draws", "expect", "dtype", "found", "strategy",
                               "learnable_temperature", "family"))
    world, dp = _parse_format_and_mesh(obj)
    _check_keys(obj["encoder"], "encoder.", ("normalize", "weight"))
    weight = _matrix(obj["encoder"]["weight"], "encoder.weight")
    _check_keys(obj["accumulation"], "accumulation.", ("steps", "normalize"), ("window",))
    steps = _int(obj["accumulation"]["steps"], "accumulation.steps", 1, 1024)
    # A partial window: only the first `window` micro-steps run; the rest must be empty.
    window = _int(obj["accumulation"].get("window", steps), "accumulation.window", 1, steps)
    batches = _parse_batches(obj["batches"], steps, dp, len(weight[0]))
    draws = _parse_draws(obj.get("padding_draws"), steps, dp)
    for m in range(window, steps):
        if any(batches[m]) or (draws is not None and any(draws[m])):
            raise CaseError(f"batches[{m}]: outside accumulation.window: must be empty")
    _check_keys(obj["rng"], "rng.", ("mode", "seed"))
    _int(obj["rng"]["seed"], "rng.seed", 0, 2**64 - 1)
    step = _parse_step_keys(obj)
    return Case(
        world=world,
        dp=dp,
        reduction=step["reduction"],
        gather=step["gather"],
        compensate=step["compensate"],
        loss=_parse_loss(obj["loss"]),
        normalize=_bool(obj["encoder"]["normalize"], "encoder.normalize"),
        weight=weight,
        steps=window,
        ga_normalize=_bool(obj["accumulation"]["normalize"], "accumulation.normalize"),
        rng_mode=_choice(obj["rng"]["mode"], "rng.mode", ("synced", "per-rank")),
        rng_seed=obj["rng"]["seed"],
        padding_draws=None if draws is None else draws[:window],
        batches=batches[:window],
        expect=_parse_expect(obj.get("expect"), len(weight), len(weight[0])),
        dtype=_choice(obj.get("dtype", "float64"), "dtype", ("float64", "float32")),
        empty_tail_steps=steps - window,
        strategy=step["strategy"],
        learnable_temperature=_bool(obj.get("learnable_temperature", False),
                                    "learnable_temperature"))
