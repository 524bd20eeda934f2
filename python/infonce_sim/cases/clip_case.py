"""`"family": "clip"` cases (issue 13): parsing and validation, no torch needed.

A CLIP case has no `loss`, `encoder`, `batches`, `rng`, `padding_draws` or
`learnable_temperature`; its `clip` object holds the two towers, the log logit scale,
the optional logit bias and the paired batches `[A][P] {"image": n x F_image,
"text": n x F_text}` (n >= 1 pairs per shard, may differ between shards).
"""

import dataclasses

from .case import (CaseError, MeshShape, _bool, _check_keys, _choice, _int, _matrix, _number,
                   _parse_format_and_mesh, _parse_row_pairs, _parse_step_keys)


@dataclasses.dataclass
class ClipCase(MeshShape):
    world: int
    dp: int
    reduction: str
    gather: str
    compensate: bool
    image_normalize: bool
    image_weight: list  # D x F_image
    text_normalize: bool
    text_weight: list  # D x F_text
    log_logit_scale: float
    logit_bias: object  # None or float
    batches: list  # [micro][dp shard] -> (image rows n x F_image, text rows n x F_text)
    steps: int
    ga_normalize: bool
    dtype: str
    strategy: object  # None or Strategy
    family: str = "clip"
    # What the shared runtime code reads of every case; CLIP has no padding randomness.
    learnable_temperature: bool = False
    padding_draws: object = None
    rng_mode: str = "synced"
    rng_seed: int = 0
    empty_tail_steps: int = 0
    expect: object = None

    @property
    def dim(self) -> int:
        return len(self.image_weight)


def _tower(obj, key):
    _check_keys(obj, f"clip.{key}.", ("normalize", "weight"))
    return (_bool(obj["normalize"], f"clip.{key}.normalize"),
            _matrix(obj["weight"], f"clip.{key}.weight"))


def parse_clip_case(obj) -> ClipCase:
    top = ("format", "family", "mesh", "reduction", "gather", "compensate", "clip",
           "accumulation")
    _check_keys(obj, "", top, ("dtype", "strategy", "expect", "found"))
    world, dp = _parse_format_and_mesh(obj)
    clip = obj["clip"]
    _check_keys(clip, "clip.", ("image_tower", "text_tower", "log_logit_scale", "logit_bias",
                                "batches"))
    image_normalize, image_weight = _tower(clip["image_tower"], "image_tower")
    text_normalize, text_weight = _tower(clip["text_tower"], "text_tower")
    if len(image_weight) != len(text_weight):
        raise CaseError(f"clip.text_tower.weight: {len(text_weight)} rows, the image tower "
                        f"has {len(image_weight)} (both map to D dimensions)")
    bias = clip["logit_bias"]
    _check_keys(obj["accumulation"], "accumulation.", ("steps", "normalize"))
    steps = _int(obj["accumulation"]["steps"], "accumulation.steps", 1, 1024)
    step = _parse_step_keys(obj)
    return ClipCase(
        world=world,
        dp=dp,
        reduction=step["reduction"],
        gather=step["gather"],
        compensate=step["compensate"],
        image_normalize=image_normalize,
        image_weight=image_weight,
        text_normalize=text_normalize,
        text_weight=text_weight,
        log_logit_scale=_number(clip["log_logit_scale"], "clip.log_logit_scale"),
        logit_bias=None if bias is None else _number(bias, "clip.logit_bias"),
        batches=_parse_row_pairs(clip["batches"], "clip", steps, dp, ("image", "text"),
                                 (len(image_weight[0]), len(text_weight[0])),
                                 "row i of each is one pair"),
        steps=steps,
        ga_normalize=_bool(obj["accumulation"]["normalize"], "accumulation.normalize"),
        dtype=_choice(obj.get("dtype", "float64"), "dtype", ("float64", "float32")),
        strategy=step["strategy"])
