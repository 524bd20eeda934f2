"""InfoNCE over the whole data-parallel batch: every rank's documents are negatives."""

from __future__ import annotations

import os

import torch
import torch.distributed as dist
import torch.nn.functional as F


def info_nce(queries: torch.Tensor, docs: torch.Tensor, positives: torch.Tensor,
             temperature: float, group: dist.ProcessGroup | None = None) -> torch.Tensor:
    """Cross-entropy of each query against every document of every rank.

    queries: [B, D] and docs: [M, D], L2-normalised; positives: [B], the index in `docs`
    of each query's positive. Returns the global loss, the same value on every rank.
    """
    world = dist.get_world_size(group) if dist.is_initialized() else 1
    if world > 1:
        rank = dist.get_rank(group)
        shards: list = [None] * world
        dist.all_gather_object(shards, (queries.detach(), docs.detach(), positives), group=group)
        shards[rank] = (queries, docs, positives)  # our own rows stay live
        offsets = [0]
        for _, shard_docs, _ in shards[:-1]:
            offsets.append(offsets[-1] + shard_docs.shape[0])
        queries = torch.cat([q for q, _, _ in shards])
        docs = torch.cat([d for _, d, _ in shards])
        positives = torch.cat([p + off for (_, _, p), off in zip(shards, offsets)])
    logits = queries @ docs.T / temperature
    loss = F.cross_entropy(logits, positives)
    if world > 1 and os.environ.get("CONTRASTIVE_LOSS_BUG") != "unscaled":
        # Each rank's gradient reaches only its own rows and DDP averages the ranks':
        # scale the gradient (not the value) by the world size.
        loss = loss * world - loss.detach() * (world - 1)
    return loss
