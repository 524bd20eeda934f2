"""Plain-function adapters (thread mode in-process) for test_backend.py, loadable by name
(`backend_adapters:FUNCTION`) in real DDP's rank processes and by the worker.

This module must not import torch.distributed.nn: `make_unimported_nn` checks that a loss
using it without the import fails in-process as under real DDP."""

import torch
import torch.distributed as dist
import torch.nn.functional as F

SUPPORTS = {
    "use_batch": [True, False],
    "reductions": ["mean", "sum"],
    "gathers": ["object", "tensor"],
    "dtypes": ["float64", "float32"],
    "max_world": 8,
    "max_replicas": 8,
    "compensate_false": False,
    "accumulation_normalize": [True, False],
    "extension_keys": ["dtype"],
}


def _contrastive(ctx, own, gathered):
    """Each own row against every gathered row; the target is the row itself."""
    keys = torch.cat(gathered)
    logits = own @ keys.T / ctx.case.loss.temperature
    offset = ctx.dp_rank * own.shape[0]
    targets = torch.arange(own.shape[0]) + offset
    return F.cross_entropy(logits, targets)


class TorchNnGather:
    """torch.distributed.nn.functional.all_gather over the DP group (torch's autograd
    function: its own backward)."""

    name = "torch.distributed.nn.functional.all_gather (test)"
    supports = SUPPORTS

    def loss(self, ctx, embeddings, labels):
        import torch.distributed.nn.functional as dnn  # the trainer's own import
        gathered = dnn.all_gather(embeddings, group=ctx.dp_group)
        return _contrastive(ctx, embeddings, gathered)


class FunctionalGather:
    """torch.distributed._functional_collectives.all_gather_tensor_autograd (C++ autograd)."""

    name = "_functional_collectives.all_gather_tensor_autograd (test)"
    supports = SUPPORTS

    def loss(self, ctx, embeddings, labels):
        import torch.distributed._functional_collectives as fc
        full = fc.all_gather_tensor_autograd(embeddings, gather_dim=0, group=ctx.dp_group)
        return _contrastive(ctx, embeddings, [full])


class UnimportedNn:
    """A trainer's bug: it uses torch.distributed.nn without importing it."""

    name = "torch.distributed.nn used without its import (test)"
    supports = SUPPORTS

    def loss(self, ctx, embeddings, labels):
        gathered = torch.distributed.nn.functional.all_gather(embeddings, group=ctx.dp_group)
        return _contrastive(ctx, embeddings, gathered)


def make_torch_nn(**_):
    return TorchNnGather()


def make_functional(**_):
    return FunctionalGather()


def make_unimported_nn(**_):
    return UnimportedNn()


assert dist is not None
