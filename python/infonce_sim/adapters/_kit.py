"""What several built-in adapters of installed packages share (sentence-transformers,
pytorch-metric-learning, pylate): their options, their handshake, and the rank's groups laid out
as the packages take them (columns anchor, positive, negative_1..negative_k; labels).

The case's rows reach a rank as groups [q, p, n_1..n_k] end to end (RankContext.inputs). These
packages take a fixed number of columns: every query of a micro-step, on every rank, must have the
same number of documents. The handshake says so (`unequal_documents: false`), so the harness sends
no other case; one that still arrives is an error here, before any collective (a rank that entered
the package's gathers with fewer columns than another would hang them instead).

What every built-in adapter may use, so that it stays within issue 28's 30 lines:
- `boolean(value, name)`, `version(distribution)`: an --option's bool, an installed version;
- `handshake(max_world, **fields)`: the `supports` fields every package adapter shares, with
  its own on top; `supports(...)`: those of a plain InfoNCE package;
- `keywords(options)`: options as a call's keyword text (an adapter's `name`);
- `configured_point(configurations, options)`: the strategy point its field-table
  CONFIGURATIONS declare for the options (one table, not a second mapping in code);
- `also_with(options, configurations)`: each configuration, then each again with `options`;
- `set_environment(prefix, settings, names)`: a trainer configured by environment variables;
- `padding_of(split, where)`: a trainer's hard-negative padding (legacy or fixed), asked of it;
- `ClipOnly`, `NtXentOnly`, `SiglipOnly`: the base of an adapter that runs that family only;
  `ntxent_supports`, `siglip_supports`: its handshake.
"""

import importlib.metadata
import os
import sys
from collections.abc import Iterable, Mapping

import torch

from ..cases.case import CaseError


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


def choice(value, allowed, name):
    """An --option value that must be one of `allowed` (ValueError naming them otherwise)."""
    if value not in allowed:
        raise ValueError(f"--option {name}={value}: expected one of {', '.join(allowed)}")
    return value


def version(distribution):
    return importlib.metadata.version(distribution)


def handshake(max_world, **fields):
    """The handshake's `supports` of a package's loss, `fields` on top of what they all share:
    in-batch negatives, DDP's mean, either `gather` axis value (the package gathers its own
    way), both dtypes, one replica per DP shard (a package gathers over the default group),
    the file's own behaviour judged (no compensate: false), GA normalisation on and off, no
    extension keys but the dtype. A field given as None is left out (the protocol's
    default)."""
    return {"use_batch": [True], "reductions": ["mean"], "gathers": ["object", "tensor"],
            "dtypes": ["float64", "float32"], "max_world": int(max_world), "max_replicas": 1,
            "compensate_false": False, "accumulation_normalize": [True, False],
            "extension_keys": ["dtype"], **{k: v for k, v in fields.items() if v is not None}}


def supports(max_world, unequal_batches, include_qq=False, reported_loss="global"):
    """The handshake of a package that runs the plain InfoNCE case (handshake()): no
    hard-negative resizing or masking, one number of documents per query."""
    # (they draw nothing: a per-rank seed changes nothing; declared so the shrinker's per-rank
    # cases run rather than fail the handshake)
    return handshake(max_world, include_qq=include_qq, unequal_batches=unequal_batches,
                     unequal_documents=False, reported_loss=reported_loss,
                     rng_modes=["synced", "per-rank"])


def ntxent_supports(max_world, **fields):
    """The handshake of a package's loss that runs the NT-Xent family only (handshake())."""
    return handshake(max_world, families=["ntxent"], extension_keys=["dtype", "family"], **fields)


def siglip_supports(max_world, **fields):
    """The handshake of a package's loss that runs the SigLIP family only (handshake())."""
    return handshake(max_world, families=["siglip"], extension_keys=["dtype", "family"], **fields)


def labelled_views(ctx, first, second):
    """An NT-Xent rank's rows as a metric-learning batch: (its first views then its second
    views, their labels: sample i's global index for both of its views, rank * n + i, which
    assumes equal batches)."""
    n = first.shape[0]
    return torch.cat([first, second]), (torch.arange(n) + ctx.dp_rank * n).repeat(2)


def keywords(options: Mapping[str, object]) -> str:
    """Options as a call's keyword arguments: "a=1, b=True"."""
    return ", ".join(f"{key}={value}" for key, value in options.items())


def configured_point(configurations: Iterable[Mapping[str, object]],
                     options: Mapping[str, object]) -> str:
    """The `_point` of the field-table configuration whose options are `options` (values
    compared as lower-case text: "true" is True)."""
    def text(value):
        return str(value).lower()
    for configuration in configurations:
        given = {k: v for k, v in configuration.items() if not k.startswith("_")}
        if given.keys() <= options.keys() and all(text(options[k]) == text(v)
                                                  for k, v in given.items()):
            return configuration["_point"]
    raise ValueError(f"no configuration declares a strategy point for {keywords(options)}")


def also_with(options: Mapping[str, str], configurations: list[dict]) -> list[dict]:
    """Field-table configurations, then each again with `options` added (and its label
    saying so)."""
    return configurations + [
        dict(c, **options, _label=c["_label"] + ", " + keywords(options)) for c in configurations]


def set_environment(prefix: str, settings: object, names: Iterable[str]) -> None:
    """Set the process environment a trainer reads its settings from: PREFIX + NAME (upper
    case) = str(settings.name), or unset for None (the trainer's default)."""
    for name in names:
        value, variable = getattr(settings, name), prefix + name.upper()
        if value is None:
            os.environ.pop(variable, None)
        else:
            os.environ[variable] = str(value)


def padding_of(split, where) -> str:
    """A trainer's hard-negative padding, asked of its group splitter `split(rows, labels,
    hard_negatives)` (rows in the protocol's layout, labels 1, 0 x k per group): one group
    [q, p, n] (rows 0, 1, 2) padded to two negatives draws j = 0 from one negative, and the
    padded row is row 1 ("legacy": row j + 1, maybe the positive) or row 2 ("fixed": row
    j + 2). Anything else is a ValueError naming `where`."""
    groups = split(torch.arange(3, dtype=torch.float64).reshape(3, 1), torch.tensor([1, 0]), 2)
    padding = {1: "legacy", 2: "fixed"}.get(int(groups[0][-1, 0]))
    if padding is None:
        raise ValueError(f"{where}: hard-negative padding is neither legacy nor fixed")
    return padding


class ClipOnly:
    """The base of an adapter that runs the CLIP family only (its `clip_loss`): an InfoNCE
    case is the step's error, not an AttributeError."""

    def loss(self, ctx, embeddings, labels):
        raise CaseError(f"{self.name}: runs CLIP cases only (family clip)")


class NtXentOnly:
    """The base of an adapter that runs the NT-Xent family only (its `ntxent_loss`): an
    InfoNCE case is the step's error, not an AttributeError."""

    def loss(self, ctx, embeddings, labels):
        raise CaseError(f"{self.name}: runs NT-Xent cases only (family ntxent)")


class SiglipOnly:
    """The base of an adapter that runs the SigLIP family only (its `siglip_loss`): an
    InfoNCE case is the step's error, not an AttributeError."""

    def loss(self, ctx, embeddings, labels):
        raise CaseError(f"{self.name}: runs SigLIP cases only (family siglip)")


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
