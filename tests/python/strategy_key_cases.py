"""Seeded case generators for the strategy keys (the tests' own, independent of the C++ side):
InfoNCE cases with a `strategy` and a learnable temperature, and `"family": "clip"` cases.

Shapes: W <= 4, P | W, F and D in 1..3 (CLIP: F in 2..3), 1..3 groups or pairs per shard
(unequal between shards unless `equal`), 1..2 micro-steps, both gather paths, every
strategy point drawn in turn (or the trainer's point without the key).
"""

import itertools
import random

GATHERS = ("detached-own-live", "detached", "autograd")
SCOPES = ("global", "local")
SCALES = ("none", "P", "W")
REDUCTIONS = ("mean", "sum")
POINTS = list(itertools.product(GATHERS, SCOPES, SCALES, REDUCTIONS))  # 36
MESHES = [(1, 1), (2, 1), (2, 2), (3, 1), (3, 3), (4, 1), (4, 2), (4, 4)]  # (W, P)


def _mesh(rng, meshes):
    """A (W, P) of `meshes`, or by default one with P > 1 (a gather) four times in five."""
    if meshes is not None:
        return meshes[rng.randrange(len(meshes))]
    gather = rng.random() < 0.8
    choices = [m for m in MESHES if (m[1] > 1) == gather]
    return choices[rng.randrange(len(choices))]


def _matrix(rng, rows, cols, spread=1.0):
    return [[round(rng.gauss(0.0, spread), 6) for _ in range(cols)] for _ in range(rows)]


def _strategy(index, reduction):
    gather, scope, scale, _ = POINTS[index % len(POINTS)]
    return {"gather": gather, "scope": scope, "scale": scale, "reduction": reduction}


def infonce_case(seed, index, learnable=None, dtype="float64", meshes=None):
    """One InfoNCE case with a strategy (the point cycles with `index`; every 37th case
    has none) and, every other case, a learnable temperature."""
    rng = random.Random(seed * 1_000_003 + index)
    world, dp = _mesh(rng, meshes)
    features, dim = rng.randint(1, 3), rng.randint(1, 3)
    steps = rng.randint(1, 2)
    reduction = POINTS[index % len(POINTS)][3]
    use_batch = rng.random() < 0.9
    hard = rng.choice([None, None, 1, 2])
    mask = rng.random() < 0.3
    batches = []
    for _ in range(steps):
        shards = []
        for _ in range(dp):
            groups = []
            for _ in range(rng.randint(1, 3)):
                rows = 2 + (rng.randint(1, 2) if hard else rng.randint(0, 2))
                groups.append(_matrix(rng, rows, features))
            shards.append(groups)
        batches.append(shards)
    case = {
        "format": "infonce-case/1",
        "mesh": {"world": world, "dp": dp},
        "reduction": reduction,
        "gather": rng.choice(["object", "tensor"]),
        "compensate": True,
        "loss": {"temperature": rng.choice([0.1, 0.5, 1.0]), "use_batch": use_batch,
                 "hard_negatives": hard, "padding": "fixed", "mask_fake_negative": mask,
                 "fake_neg_margin": 0.1, "include_qq": rng.random() < 0.3,
                 "include_dd": rng.random() < 0.3},
        "encoder": {"normalize": rng.random() < 0.6, "weight": _matrix(rng, dim, features)},
        "accumulation": {"steps": steps, "normalize": rng.random() < 0.7},
        "rng": {"mode": "synced", "seed": rng.randrange(1000)},
        "batches": batches,
        "dtype": dtype,
    }
    if index % 37 != 36:
        case["strategy"] = _strategy(index, reduction)
    if learnable if learnable is not None else index % 2 == 0:
        case["learnable_temperature"] = True
    return case


def clip_case(seed, index, dtype="float64", equal=False, bias=None, strategy=True,
              meshes=None):
    """One CLIP case; the strategy point cycles with `index` (none: the trainer's point)."""
    rng = random.Random(seed * 1_000_003 + index)
    world, dp = _mesh(rng, meshes)
    image_features, text_features, dim = rng.randint(2, 3), rng.randint(2, 3), rng.randint(1, 3)
    steps = rng.randint(1, 2)
    reduction = POINTS[index % len(POINTS)][3] if strategy else "mean"
    batches = []
    for _ in range(steps):
        pairs = rng.randint(1, 3)
        shards = []
        for _ in range(dp):
            n = pairs if equal else rng.randint(1, 3)
            shards.append({"image": _matrix(rng, n, image_features),
                           "text": _matrix(rng, n, text_features)})
        batches.append(shards)
    if bias is None:
        bias = rng.random() < 0.3
    case = {
        "format": "infonce-case/1",
        "family": "clip",
        "mesh": {"world": world, "dp": dp},
        "reduction": reduction,
        "gather": rng.choice(["object", "tensor"]),
        "compensate": True,
        "clip": {
            "image_tower": {"normalize": rng.random() < 0.7,
                            "weight": _matrix(rng, dim, image_features)},
            "text_tower": {"normalize": rng.random() < 0.7,
                           "weight": _matrix(rng, dim, text_features)},
            "log_logit_scale": rng.choice([2.6592600369327779, 0.0, 1.0]),
            "logit_bias": round(rng.gauss(0, 1), 6) if bias else None,
            "batches": batches,
        },
        "accumulation": {"steps": steps, "normalize": rng.random() < 0.7},
        "dtype": dtype,
    }
    if strategy and index % 37 != 36:
        case["strategy"] = _strategy(index, reduction)
    return case
