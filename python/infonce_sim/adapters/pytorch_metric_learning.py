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
"""

from pytorch_metric_learning import distances, losses
from pytorch_metric_learning.utils.distributed import DistributedLossWrapper

from . import _kit


class MetricLearningAdapter:
    def __init__(self, efficient=False, loss="NTXentLoss", distance="dot", max_world=8, **_):
        if loss not in ("NTXentLoss", "SupConLoss") or distance not in ("dot", "cos"):
            raise ValueError("--option loss= NTXentLoss or SupConLoss, distance= dot or cos")
        self.efficient, self.cls = _kit.boolean(efficient, "efficient"), getattr(losses, loss)
        self.distance = distance
        self.name = (f"pytorch-metric-learning {_kit.version('pytorch-metric-learning')} "
                     f"DistributedLossWrapper({loss}(distance={distance}), "
                     f"efficient={self.efficient})")
        self.supports = _kit.supports(max_world, unequal_batches=False)

    def loss(self, ctx, embeddings, labels):
        k = _kit.negatives_per_query(ctx, "pytorch-metric-learning")
        groups = embeddings.reshape(-1, k + 2, embeddings.shape[1])
        query_labels, doc_labels = _kit.metric_labels(ctx, k)
        distance = (distances.DotProductSimilarity(normalize_embeddings=False)
                    if self.distance == "dot" else distances.CosineSimilarity())
        wrapper = DistributedLossWrapper(
            self.cls(temperature=ctx.case.loss.temperature, distance=distance), self.efficient)
        return wrapper(groups[:, 0], query_labels, ref_emb=groups[:, 1:].reshape(-1, groups.shape[2]),
                       ref_labels=doc_labels)


# The measured field table (infonce_sim.field): its configurations, at their strategy points.
CONFIGURATIONS = [
    {"efficient": "false", "_point": "detached-own-live/global/scale-W/mean"},
    {"efficient": "true", "_point": "detached-own-live/local/scale-W/mean"},
]


def make(**options):
    return MetricLearningAdapter(**options)
