"""How infonce-sim runs contrastive.loss.info_nce: one rank's micro-step of a case."""

from __future__ import annotations

import torch

from contrastive.loss import info_nce


class GatheredInfoNCE:
    name = "contrastive.loss.info_nce"
    supports = {
        "use_batch": [True],  # the loss always takes every rank's documents
        "dtypes": ["float64", "float32"],
        "max_world": 8,
        "max_replicas": 2,
        "accumulation_normalize": [True, False],
        "rng_modes": ["synced", "per-rank"],  # it draws no random numbers
        "extension_keys": ["dtype"],
    }

    def loss(self, ctx, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        # The case's rows are [query, positive, negatives...] per group; labels are
        # [1, 0, ..., 0] per group, over the rows after each query.
        starts = (labels == 1).nonzero().flatten() + torch.arange(int(labels.sum()))
        is_query = torch.zeros(embeddings.shape[0], dtype=torch.bool)
        is_query[starts] = True
        positives = starts - torch.arange(starts.shape[0])  # the positive follows the query
        return info_nce(embeddings[is_query], embeddings[~is_query], positives,
                        ctx.case.loss.temperature, group=ctx.dp_group)


def make(**_options: object) -> GatheredInfoNCE:
    return GatheredInfoNCE()
