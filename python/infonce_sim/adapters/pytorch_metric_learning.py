"""The `pytorch-metric-learning` adapter: the installed package's DistributedLossWrapper around
its NTXentLoss (or SupConLoss), the InfoNCE case as anchors against references.

    --adapter pytorch-metric-learning [--option efficient=true] [--option loss=SupConLoss]
        [--option distance=cos]

Each rank calls DistributedLossWrapper(NTXentLoss(temperature=T, distance=...), efficient)
(queries, query_labels, ref_emb=documents, ref_labels=document_labels): a query's label is
its group's global index, its positive shares it, every negative has a label of its own, so
each query's one positive pair is its positive and every other document is a negative: the
InfoNCE loss, a mean over the queries. distance: DotProductSimilarity(normalize_embeddings
False) (the runtime has normalised the rows when the case says so); `cos` keeps the
package default CosineSimilarity. The wrapper gathers with torch.distributed.all_gather
(one shape on every rank: equal batches) and returns loss * world_size. Strategy points
(docs/field.md rows 11, 12): efficient=False detached-own-live/global/scale-W/mean,
efficient=True detached-own-live/local/scale-W/mean.

`--option family=ntxent`: the NT-Xent family (SPEC section 14) instead: each rank calls the
wrapper on its two views' rows (first, then second) with sample i's global index as the
label of both (equal batches: rank * n + i), which makes NTXentLoss the NT-Xent loss
(each row's one positive is its other view, every other sample's rows its negatives).
"""

from pytorch_metric_learning import distances, losses
from pytorch_metric_learning.utils.distributed import DistributedLossWrapper

from . import _kit


class MetricLearningAdapter:
    def __init__(self, efficient=False, loss="NTXentLoss", distance="dot", family="infonce",
                 max_world=8, **_):
        self.cls = getattr(losses, _kit.choice(loss, ("NTXentLoss", "SupConLoss"), "loss"))
        self.cosine = _kit.choice(distance, ("dot", "cos"), "distance") == "cos"
        self.efficient = _kit.boolean(efficient, "efficient")
        self.name = (f"pytorch-metric-learning {_kit.version('pytorch-metric-learning')} Distributed"
                     f"LossWrapper({loss}(distance={distance}), efficient={self.efficient})")
        ntxent = _kit.choice(family, ("infonce", "ntxent"), "family") == "ntxent"
        self.supports = (_kit.ntxent_supports if ntxent else _kit.supports)(max_world,
                                                                            unequal_batches=False)

    def wrapper(self, temperature):
        distance = (distances.CosineSimilarity() if self.cosine
                    else distances.DotProductSimilarity(normalize_embeddings=False))
        return DistributedLossWrapper(self.cls(temperature=temperature, distance=distance),
                                      self.efficient)

    def ntxent_loss(self, ctx, first, second):
        return self.wrapper(ctx.case.temperature)(*_kit.labelled_views(ctx, first, second))

    def loss(self, ctx, embeddings, labels):
        k = _kit.negatives_per_query(ctx, "pytorch-metric-learning")
        groups = embeddings.reshape(-1, k + 2, embeddings.shape[1])
        query_labels, doc_labels = _kit.metric_labels(ctx, k)
        return self.wrapper(ctx.case.loss.temperature)(
            groups[:, 0], query_labels, ref_emb=groups[:, 1:].reshape(-1, groups.shape[2]),
            ref_labels=doc_labels)


# The measured field table (infonce_sim.field): its configurations, at their strategy points.
CONFIGURATIONS = [
    {"efficient": "false", "_point": "detached-own-live/global/scale-W/mean"},
    {"efficient": "true", "_point": "detached-own-live/local/scale-W/mean"},
    {"family": "ntxent", "_point": "detached-own-live/global/scale-W/mean"},
]


def make(**options):
    return MetricLearningAdapter(**options)
