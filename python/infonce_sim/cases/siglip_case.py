"""`"family": "siglip"` cases (SPEC section 15): parsing and validation, no torch needed.

A SigLIP case has no `loss`, `batches`, `rng` or `padding_draws`; its `encoder` is
`{"weight": D x (F_image + F_text)}`, the towers' weights side by side (the image tower's
first `siglip.image_features` columns, then the text tower's), and its `siglip` object holds
whether each tower's output is L2-normalised, the learnable `log_scale` (logits are
exp(log_scale) a.b + bias; at most 50) and `bias`, and the paired batches `[A][P] {"image":
n x F_image, "text": n x F_text}` (n >= 1 pairs per shard, may differ between shards).
"""

import dataclasses

from .case import (CaseError, MeshShape, _bool, _check_keys, _choice, _int, _matrix, _number,
                   _parse_format_and_mesh, _parse_row_pairs, _parse_step_keys)


@dataclasses.dataclass
class SiglipCase(MeshShape):
    world: int
    dp: int
    reduction: str
    gather: str
    compensate: bool
    weight: list  # D x (F_image + F_text)
    image_features: int  # F_image: the first columns of `weight`
    image_normalize: bool
    text_normalize: bool
    log_scale: float
    bias: float
    batches: list  # [micro][dp shard] -> (image rows n x F_image, text rows n x F_text)
    steps: int
    ga_normalize: bool
    dtype: str
    strategy: object  # None or Strategy
    family: str = "siglip"
    # What the shared runtime code reads of every case; SigLIP has no padding randomness.
    learnable_temperature: bool = False
    padding_draws: object = None
    rng_mode: str = "synced"
    rng_seed: int = 0
    empty_tail_steps: int = 0
    expect: object = None

    @property
    def dim(self) -> int:
        return len(self.weight)

    @property
    def image_weight(self) -> list:
        return [row[:self.image_features] for row in self.weight]

    @property
    def text_weight(self) -> list:
        return [row[self.image_features:] for row in self.weight]


def parse_siglip_case(obj) -> SiglipCase:
    top = ("format", "family", "mesh", "reduction", "gather", "compensate", "encoder", "siglip",
           "accumulation")
    _check_keys(obj, "", top, ("dtype", "strategy", "expect", "found"))
    world, dp = _parse_format_and_mesh(obj)
    siglip = obj["siglip"]
    _check_keys(obj["encoder"], "encoder.", ("weight",))
    _check_keys(siglip, "siglip.", ("image_features", "image_normalize", "text_normalize",
                                    "log_scale", "bias", "batches"))
    weight = _matrix(obj["encoder"]["weight"], "encoder.weight")
    columns = len(weight[0])
    if columns < 2:
        raise CaseError(f"encoder.weight: {columns} column, SigLIP needs F_image + F_text >= 2")
    image_features = _int(siglip["image_features"], "siglip.image_features", 1, columns - 1)
    log_scale = _number(siglip["log_scale"], "siglip.log_scale")
    if log_scale > 50:
        raise CaseError(f"siglip.log_scale: must be <= 50 (exp(50) = 5e21), got {log_scale}")
    _check_keys(obj["accumulation"], "accumulation.", ("steps", "normalize"))
    steps = _int(obj["accumulation"]["steps"], "accumulation.steps", 1, 1024)
    step = _parse_step_keys(obj)
    return SiglipCase(
        world=world,
        dp=dp,
        reduction=step["reduction"],
        gather=step["gather"],
        compensate=step["compensate"],
        weight=weight,
        image_features=image_features,
        image_normalize=_bool(siglip["image_normalize"], "siglip.image_normalize"),
        text_normalize=_bool(siglip["text_normalize"], "siglip.text_normalize"),
        log_scale=log_scale,
        bias=_number(siglip["bias"], "siglip.bias"),
        batches=_parse_row_pairs(siglip["batches"], "siglip", steps, dp, ("image", "text"),
                                 (image_features, columns - image_features),
                                 "row i of each is one pair"),
        steps=steps,
        ga_normalize=_bool(obj["accumulation"]["normalize"], "accumulation.normalize"),
        dtype=_choice(obj.get("dtype", "float64"), "dtype", ("float64", "float32")),
        strategy=step["strategy"])
