"""What several built-in adapters of installed packages share (sentence-transformers,
pytorch-metric-learning, pylate): their options, their handshake, and the rank's groups laid out
as the packages take them (columns anchor, positive, negative_1..negative_k; labels).

The case's rows reach a rank as groups [q, p, n_1..n_k] end to end (RankContext.inputs). These
packages take a fixed number of columns: every query of a micro-step, on every rank, must have the
same number of documents. The handshake says so (`unequal_documents: false`), so the harness sends
no other case; one that still arrives is an error here, before any collective (a rank that entered
the package's gathers with fewer columns than another would hang them instead).
"""

import importlib.metadata
import sys

import torch

from ..case import CaseError


def boolean(value, name):
    """An --option value as a bool ("true"/"false", "1"/"0", "yes"/"no", "on"/"off")."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"--option {name}={value}: expected true or false")


def version(distribution):
    return importlib.metadata.version(distribution)


def supports(max_world, unequal_batches, include_qq=False, reported_loss="global"):
    """The handshake of a package that runs the plain InfoNCE case: in-batch negatives over its
    own gather (either `gather` axis value is run: the package gathers its own way), DDP's mean,
    one replica per DP shard (the packages gather over the default group), the file's own
    behaviour judged (no compensate: false), no hard-negative resizing, masking or extension
    keys but the dtype."""
    return {
        "use_batch": [True],
        "include_qq": include_qq,
        "reductions": ["mean"],
        "gathers": ["object", "tensor"],
        "dtypes": ["float64", "float32"],
        "max_world": int(max_world),
        "max_replicas": 1,
        "unequal_batches": unequal_batches,
        "unequal_documents": False,
        "reported_loss": reported_loss,
        "compensate_false": False,
        "accumulation_normalize": [True, False],
        # (they draw nothing: a per-rank seed changes nothing; declared so the shrinker's
        # per-rank cases run rather than fail the handshake)
        "rng_modes": ["synced", "per-rank"],
        "extension_keys": ["dtype"],
    }


def refuse(ctx, message):
    """A case the package's input cannot express: one line on stderr from world rank 0 (a
    campaign's log can count them), then the step's error."""
    if ctx.world_rank == 0:
        print(f"refused: {message}", file=sys.stderr, flush=True)
    raise CaseError(message)


def negatives_per_query(ctx, package):
    """k: the one number of negatives of every group of this micro-step (all DP shards)."""
    sizes = sorted({len(group) - 2 for shard in ctx.case.batches[ctx.micro] for group in shard})
    if len(sizes) != 1:
        refuse(ctx, f"{package} takes a fixed number of columns (anchor, positive, "
               f"negative_1..negative_k): this micro-step's groups have k in {sizes} "
               "negatives (the handshake cannot restrict k to one value yet)")
    return sizes[0]


def columns(rows, k):
    """Rows [q, p, n_1..n_k] per group, end to end -> [queries, positives, negatives_1, ...],
    each [groups, ...] (row g of every column is group g's)."""
    return list(rows.reshape(-1, k + 2, *rows.shape[1:]).unbind(1))


def groups_before(ctx):
    """The number of groups on the DP shards before this rank's in this micro-step (its groups'
    global offset)."""
    return sum(len(shard) for shard in ctx.case.batches[ctx.micro][:ctx.dp_rank])


def metric_labels(ctx, k):
    """Labels for a metric-learning loss over queries (anchors) and documents (references),
    unique over the micro-step's whole batch: query g and its positive share g's global index;
    every negative has its own label (below -1, matching no query), so each query's positives
    are its one document and every other document is a negative."""
    shard = ctx.case.batches[ctx.micro][ctx.dp_rank]
    first = groups_before(ctx)
    queries = torch.arange(first, first + len(shard), dtype=torch.int64)
    docs = torch.full((len(shard), k + 1), -1, dtype=torch.int64)
    docs[:, 0] = queries
    # negatives: -2 - (global negative index)
    docs[:, 1:] = -2 - (queries.unsqueeze(1) * k + torch.arange(k).unsqueeze(0))
    return queries, docs.reshape(-1)


class SentenceModel(torch.nn.Module):
    """What a sentence-transformers loss calls, `model(features)["sentence_embedding"]`: a
    module that maps a column's features {"rows": tensor} to their embeddings, embed(rows).
    Wrapped in nn.Sequential as SentenceTransformer is (the losses index model[0])."""

    def __init__(self, embed):
        super().__init__()
        self.embed = embed

    def forward(self, features):
        return dict(features, sentence_embedding=self.embed(features["rows"]))


def sentence_model(embed):
    return torch.nn.Sequential(SentenceModel(embed))


class TokenModel(torch.nn.Module):
    """What a pylate (ColBERT) loss calls, `model(features)["token_embeddings"]`: each row one
    token, [rows, 1, D] (MaxSim over one token is the dot product); `skiplist` empty."""

    skiplist = []

    def __init__(self, embed):
        super().__init__()
        self.embed = embed

    def forward(self, features):
        return dict(features, token_embeddings=self.embed(features["rows"]).unsqueeze(1))


def token_features(rows):
    """A column's features for TokenModel: one token per row, unmasked."""
    ones = torch.ones(rows.shape[0], 1, dtype=torch.int64)
    return {"input_ids": ones, "attention_mask": ones, "rows": rows}


def unnormalized(case, package):
    """Why a case without L2 normalisation is declined (or None): the package normalises every
    embedding itself, so encoder.normalize false is not its loss."""
    if case.normalize:
        return None
    return f"{package} L2-normalises every embedding itself: encoder.normalize false is not its loss"
