"""The `pylate` adapter: the installed package's ColBERT losses Contrastive / CachedContrastive.

    --adapter pylate [--option loss=CachedContrastive] [--option gather_across_devices=true]
        [--option mini_batch_size=N]

pylate 1.2.0 pins sentence-transformers 4.0.2 and transformers 4.48.2: it runs from its own
venv layered on the main one (scripts/python-env.sh, INFONCE_PY_PROFILE=pylate). Each rank
calls loss([anchor, positive, negative_1..k features]) with temperature T; the model gives
every row as one token (MaxSim over one token is the dot product), which pylate
L2-normalises itself (cases without encoder.normalize are declined). Contrastive gets the
rank's live `embeddings`; CachedContrastive (GradCache) re-encodes the inputs (ctx.encode).
Both multiply the loss by get_world_size(); with gather_across_devices the documents go
through torch.distributed.nn.all_gather and the targets are rank * batch + i: point
autograd/local/scale-W/mean (equal batches).

pylate's utils/distributed.py calls `dist.nn.all_gather` but imports only `torch.distributed`:
in a process where nothing else imported `torch.distributed.nn` it fails (AttributeError,
seen on the in-process backend). Under DDP on torch 2.13 the wrapper's constructor imports it
(through torch._dynamo), as the training stacks pylate runs in do, so the adapter imports it
here, as that stack would, to judge the gradient.
"""

import torch.distributed.nn  # noqa: F401 - what DDP's constructor imports; pylate relies on it

from pylate import losses

from . import _kit


class PylateAdapter:
    def __init__(self, loss="Contrastive", gather_across_devices=False, mini_batch_size=2,
                 max_world=8, **_):
        if loss not in ("Contrastive", "CachedContrastive"):
            raise ValueError("--option loss= Contrastive or CachedContrastive")
        self.cls, self.gather = getattr(losses, loss), _kit.boolean(
            gather_across_devices, "gather_across_devices")
        self.cached = {"mini_batch_size": int(mini_batch_size)} if loss != "Contrastive" else {}
        self.name = (f"pylate {_kit.version('pylate')} {loss}(gather_across_devices="
                     f"{self.gather}" + "".join(f", {k}={v}" for k, v in self.cached.items())
                     + f") with sentence-transformers {_kit.version('sentence-transformers')}")
        self.supports = _kit.supports(max_world, unequal_batches=not self.gather)

    def decline(self, case):
        return _kit.unnormalized(case, "pylate")

    def loss(self, ctx, embeddings, labels):
        k = _kit.negatives_per_query(ctx, "pylate")
        rows, embed = (ctx.inputs(ctx.micro)[0], ctx.encode) if self.cached else (embeddings, None)
        loss_fn = self.cls(_kit.TokenModel(embed or (lambda e: e)), gather_across_devices=self.gather,
                           temperature=ctx.case.loss.temperature, **self.cached)
        return loss_fn([_kit.token_features(column) for column in _kit.columns(rows, k)])


# The measured field table (infonce_sim.field): its configurations, at their strategy points.
CONFIGURATIONS = [
    {"gather_across_devices": "true", "_point": "autograd/local/scale-W/mean"},
    {"loss": "CachedContrastive", "gather_across_devices": "true"},
]


def make(**options):
    return PylateAdapter(**options)
