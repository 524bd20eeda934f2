"""Wrong SigLIP losses (plain-function adapters, thread mode in-process) for
test_field_siglip.py: `check --sut` must fail each one. Loadable by the worker as
`siglip_standins:FUNCTION` with this directory on PYTHONPATH.

Each rank scores its own images against every rank's texts (torch.distributed.nn's
autograd all_gather over the DP group, as open_clip's dist_impl=gather) with SPEC section
15's labels; the mistakes are in how the result is scaled or differentiated."""

import torch
import torch.distributed as dist
import torch.distributed.nn  # noqa: F401 - the autograd all_gather
import torch.nn.functional as F

SUPPORTS = {"families": ["siglip"], "reductions": ["mean"], "gathers": ["object", "tensor"],
            "dtypes": ["float64", "float32"], "max_world": 4, "max_replicas": 1,
            "accumulation_normalize": [True, False], "extension_keys": ["dtype", "family"],
            "unequal_batches": False, "reported_loss": "rank-local"}


def _own_against_all(ctx, image, texts):
    """-sum log sigmoid(y * logit) of the own images against `texts` (every rank's, in
    rank order), y = +1 at the own pair's column."""
    all_text = torch.cat(texts)
    logits = ctx.log_scale.exp() * image @ all_text.T + ctx.bias
    n = image.shape[0]
    labels = -torch.ones_like(logits)
    labels[torch.arange(n), ctx.dp_rank * n + torch.arange(n)] = 1.0
    return -F.logsigmoid(labels * logits).sum()


class GlobalDivisor:
    """Divides by the global number of pairs (n x P) instead of the rank's own n: the towers'
    and the direct parameters' gradients are 1/P of the full batch's."""

    name = "SigLIP dividing by the global batch (test stand-in)"
    supports = SUPPORTS

    def siglip_loss(self, ctx, image, text):
        texts = torch.distributed.nn.all_gather(text, group=ctx.dp_group)
        return _own_against_all(ctx, image, texts) / (image.shape[0] * ctx.dp)


class DetachedTexts:
    """Receives the other ranks' texts without their gradients' way back (a plain
    all_gather, the own slot live): the texts lose every other rank's terms."""

    name = "SigLIP with detached received texts (test stand-in)"
    supports = SUPPORTS

    def siglip_loss(self, ctx, image, text):
        texts = [torch.empty_like(text) for _ in range(ctx.dp)]
        dist.all_gather(texts, text.detach().contiguous(), group=ctx.dp_group)
        texts[ctx.dp_rank] = text
        return _own_against_all(ctx, image, texts) / image.shape[0]


def global_divisor(**_):
    return GlobalDivisor()


def detached_texts(**_):
    return DetachedTexts()
