"""`"family": "ntxent"` cases (SPEC section 14): parsing and validation, no torch needed.

An NT-Xent case has no `loss`, `encoder`, `batches`, `rng` or `padding_draws`; its
`ntxent` object holds the shared encoder, the temperature and the batches `[A][P]
{"first": n x F, "second": n x F}` (n >= 1 samples per shard, row i of each being sample
i's two views; n may differ between shards). `learnable_temperature` makes tau = 1 / T a
parameter, as for InfoNCE.
"""

import dataclasses

from .case import (CaseError, MeshShape, _bool, _check_keys, _choice, _int, _matrix, _number,
                   _parse_format_and_mesh, _parse_row_pairs, _parse_step_keys)


@dataclasses.dataclass
class NtXentCase(MeshShape):
    world: int
    dp: int
    reduction: str
    gather: str
    compensate: bool
    normalize: bool
    weight: list  # D x F
    temperature: float
    batches: list  # [micro][dp shard] -> (first views n x F, second views n x F)
    steps: int
    ga_normalize: bool
    dtype: str
    strategy: object  # None or Strategy
    learnable_temperature: bool = False
    family: str = "ntxent"
    # What the shared runtime code reads of every case; NT-Xent has no padding randomness.
    padding_draws: object = None
    rng_mode: str = "synced"
    rng_seed: int = 0
    empty_tail_steps: int = 0
    expect: object = None

    @property
    def dim(self) -> int:
        return len(self.weight)


def parse_ntxent_case(obj) -> NtXentCase:
    top = ("format", "family", "mesh", "reduction", "gather", "compensate", "ntxent",
           "accumulation")
    _check_keys(obj, "", top, ("dtype", "strategy", "learnable_temperature", "expect", "found"))
    world, dp = _parse_format_and_mesh(obj)
    ntxent = obj["ntxent"]
    _check_keys(ntxent, "ntxent.", ("encoder", "temperature", "batches"))
    _check_keys(ntxent["encoder"], "ntxent.encoder.", ("normalize", "weight"))
    weight = _matrix(ntxent["encoder"]["weight"], "ntxent.encoder.weight")
    temperature = _number(ntxent["temperature"], "ntxent.temperature")
    if temperature <= 0:
        raise CaseError("ntxent.temperature: must be > 0")
    _check_keys(obj["accumulation"], "accumulation.", ("steps", "normalize"))
    steps = _int(obj["accumulation"]["steps"], "accumulation.steps", 1, 1024)
    step = _parse_step_keys(obj)
    return NtXentCase(
        world=world,
        dp=dp,
        reduction=step["reduction"],
        gather=step["gather"],
        compensate=step["compensate"],
        normalize=_bool(ntxent["encoder"]["normalize"], "ntxent.encoder.normalize"),
        weight=weight,
        temperature=temperature,
        batches=_parse_row_pairs(ntxent["batches"], "ntxent", steps, dp, ("first", "second"),
                                 (len(weight[0]), len(weight[0])),
                                 "row i of each is one sample's two views"),
        steps=steps,
        ga_normalize=_bool(obj["accumulation"]["normalize"], "accumulation.normalize"),
        dtype=_choice(obj.get("dtype", "float64"), "dtype", ("float64", "float32")),
        strategy=step["strategy"],
        learnable_temperature=_bool(obj.get("learnable_temperature", False),
                                    "learnable_temperature"))
