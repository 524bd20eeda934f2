"""The `sentence-transformers` adapter: the installed package's (Cached)MultipleNegativesRankingLoss.

    --adapter sentence-transformers [--option loss=CachedMultipleNegativesRankingLoss]
        [--option gather_across_devices=true] [--option similarity=cos] [--option mini_batch_size=N]

Each rank calls loss([anchor, positive, negative_1..k features], None) with scale = 1/T,
similarity_fct dot_score (the runtime has L2-normalised the rows when the case says so;
`similarity=cos` keeps the package default cos_sim, which equals it only for normalised
cases), directions + "query_to_query" for include_qq. The model is a module returning
the column's rows: MNRL gets the rank's live `embeddings`; the cached loss (GradCache: it
embeds every mini-batch twice) gets the rank's inputs and re-encodes them (ctx.encode).
Strategy points (docs/strategies.md): gather_across_devices autograd/local/scale-1/mean
(equal batches: the offset is rank * batch size), off: no gather (per-device negatives).
"""

from sentence_transformers import losses, util

from . import _kit

LOSSES = ("MultipleNegativesRankingLoss", "CachedMultipleNegativesRankingLoss")


class SentenceTransformersAdapter:
    def __init__(self, loss=LOSSES[0], gather_across_devices=False, similarity="dot",
                 mini_batch_size=2, max_world=8, **_):
        if loss not in LOSSES or similarity not in ("dot", "cos"):
            raise ValueError(f"--option loss= one of {LOSSES}, similarity= dot or cos")
        self.cls, self.gather = getattr(losses, loss), _kit.boolean(
            gather_across_devices, "gather_across_devices")
        self.similarity = util.dot_score if similarity == "dot" else util.cos_sim
        self.cached = {"mini_batch_size": int(mini_batch_size)} if loss != LOSSES[0] else {}
        self.name = (f"sentence-transformers {_kit.version('sentence-transformers')} {loss}("
                     f"gather_across_devices={self.gather}, similarity_fct={similarity}"
                     + "".join(f", {k}={v}" for k, v in self.cached.items()) + ")")
        self.supports = _kit.supports(max_world, unequal_batches=not self.gather, include_qq=True,
                                      reported_loss="rank-local" if self.gather else "global")

    def loss(self, ctx, embeddings, labels):
        k = _kit.negatives_per_query(ctx, "sentence-transformers")
        rows, embed = (ctx.inputs(ctx.micro)[0], ctx.encode) if self.cached else (embeddings, None)
        model = _kit.sentence_model(embed or (lambda e: e))
        directions = ("query_to_doc",) + ("query_to_query",) * ctx.case.loss.include_qq
        loss_fn = self.cls(model, scale=1.0 / ctx.case.loss.temperature,
                           similarity_fct=self.similarity, gather_across_devices=self.gather,
                           directions=directions, **self.cached)
        return loss_fn([{"rows": column} for column in _kit.columns(rows, k)], None)


# The measured field table (infonce_sim.field): its configurations, at their strategy points.
CONFIGURATIONS = [
    {"gather_across_devices": "true", "_point": "autograd/local/scale-1/mean"},
    {"loss": LOSSES[1], "gather_across_devices": "true", "_point": "autograd/local/scale-1/mean"},
]


def make(**options):
    return SentenceTransformersAdapter(**options)
