"""The `conformance` adapter: the SPEC's own torch reading (infonce_sim.spec) on one rank.

Written as a generator: it yields its collectives (Collective), so the in-process
runtime runs it without threads and real DDP fulfils them with torch.distributed.
"""

import torch

from ..rank import Collective
from ..spec import compensation_scale, infonce_loss

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
    "extension_keys": ["dtype", "accumulation.window"],
}


def _gather_tensors(value, group, size):
    """Tensor path: all-gather the shapes first, then the zero-padded tensors."""
    rows = torch.tensor([value.shape[0]], dtype=torch.int64)
    all_rows = yield Collective("all_gather", rows, group)
    counts = [int(r) for r in all_rows]
    longest = max(max(counts), 1)  # gloo does not gather empty tensors
    padded = torch.zeros((longest,) + tuple(value.shape[1:]), dtype=value.dtype)
    padded[:value.shape[0]] = value
    out = yield Collective("all_gather", padded, group)
    return [t[:n] for t, n in zip(out, counts)]


def _gather_objects(value, group, size):
    out = yield Collective("all_gather_object", value, group)
    return out


def gather_over_dp_group(ctx, embeddings, labels):
    """Every DP rank's embeddings and labels in slot order; own live rows in slot dp_rank."""
    gather = _gather_objects if ctx.case.gather == "object" else _gather_tensors
    slots = yield from gather(embeddings.detach(), ctx.dp_group, ctx.dp)
    all_labels = yield from gather(labels, ctx.dp_group, ctx.dp)
    slots = [s.detach() for s in slots]
    slots[ctx.dp_rank] = embeddings
    return torch.cat(slots, dim=0), torch.cat(all_labels, dim=0)


class ConformanceAdapter:
    name = "conformance: the SPEC's torch reading (infonce_sim.spec)"
    # The only generator its code draws from: numpy's global one (hard-negative padding,
    # spec.numpy_choice). The in-process runtime keeps just that one per rank.
    random_generators = ("numpy",)

    def __init__(self, max_world=8, max_replicas=8):
        self.supports = dict(SUPPORTS, max_world=max_world, max_replicas=max_replicas)

    def loss(self, ctx, embeddings, labels):
        if ctx.case.loss.use_batch and ctx.dp > 1:
            embeddings, labels = yield from gather_over_dp_group(ctx, embeddings, labels)
        loss = infonce_loss(embeddings, labels, ctx.case.loss, ctx.padding_stream())
        scale = compensation_scale(ctx.case)
        if scale == 1:
            return loss
        # SPEC section 3: backpropagate s * L, report L itself (also when L is not finite)
        return loss * scale - loss.detach() * (scale - 1), loss


def make(max_world=8, max_replicas=8, **_):
    return ConformanceAdapter(max_world, max_replicas)
