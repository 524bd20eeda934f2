"""The `open-clip` adapter: open_clip's real ClipLoss (src/open_clip/loss.py) on one rank.

The file is loaded from the user's copy, never edited or copied: `open_clip_root`
(`--open-clip-root DIR`: DIR/src/open_clip/loss.py), or `open_clip_file` (`--option
open_clip_file=PATH`), or by default the installed `open_clip` package's `loss.py`, found
with importlib.util.find_spec and executed by path (`import open_clip` would run the
package's __init__, which imports torchvision; loss.py needs only torch).
At mlfoundations/open_clip commit 89fb801f the file decorates an unrelated function with
`torch.compiler.disable`, which torch < 2.1 lacks; `_loading.load_file` puts an identity
decorator there where it is missing (the eager-mode semantics of that decorator).

Each rank calls, per micro-step,
    ClipLoss(local_loss=..., gather_with_grad=..., rank=dp_rank, world_size=P,
             cache_labels=False)(image_features, text_features, logit_scale)
with logit_scale = exp(the replica's learnable log logit scale). ClipLoss gathers with
torch.distributed's default group, which is the DP group only when there are no
replicas: the adapter declares max_replicas 1. Its strategy is baked into its options
(docs/strategies.md): default detached-own-live/global/scale-1/mean, `local_loss`
detached/local/scale-1/mean, `gather_with_grad` autograd/global/scale-1/mean, both
autograd/local/scale-1/mean (CONFIGURATIONS below, the one table of them, names the
point in the handshake). So it declares neither `strategy` nor `compensate_false`,
only the mean reduction, and no logit bias (ClipLoss is called without one; the worker
refuses cases outside the handshake: a logit bias, replicas). Its
gathers need the same number of pairs on every shard (dist.all_gather of
zeros_like(own features)) and its local targets are `n * rank`: with unequal shards it
fails or points at other rows, as open_clip does.
"""

from . import _kit, _loading

# The field table (python -m infonce_sim.field): the distribution, and ClipLoss's four option
# combinations (--option KEY=VALUE each) with their strategy points.
PACKAGE = "open-clip-torch"
CONFIGURATIONS = [
    {"local_loss": "false", "gather_with_grad": "false",
     "_point": "detached-own-live/global/scale-1/mean"},
    {"local_loss": "false", "gather_with_grad": "true", "_point": "autograd/global/scale-1/mean"},
    {"local_loss": "true", "gather_with_grad": "false", "_point": "detached/local/scale-1/mean"},
    {"local_loss": "true", "gather_with_grad": "true", "_point": "autograd/local/scale-1/mean"},
]


class OpenClipAdapter(_kit.ClipOnly):
    def __init__(self, open_clip_root=None, open_clip_file=None, local_loss=False,
                 gather_with_grad=False, max_world=8, **_):
        self.path = _loading.source_file(
            "open_clip/loss.py", open_clip_root and f"{open_clip_root}/src", open_clip_file,
            hint="pip install open-clip-torch --no-deps, or give --open-clip-root DIR or "
                 "--option open_clip_file=PATH")
        self.module = _loading.load_file(self.path, "open_clip_loss_under_test")
        self.options = {"local_loss": _kit.boolean(local_loss, "local_loss"),
                        "gather_with_grad": _kit.boolean(gather_with_grad, "gather_with_grad")}
        self.point = _kit.configured_point(CONFIGURATIONS, self.options)
        self.name = f"open_clip ClipLoss ({self.path}; {_kit.keywords(self.options)}: {self.point})"
        # ClipLoss's all_gather needs one shape on every rank, its local targets are n * rank
        self.supports = _kit.handshake(  # a local loss reports the rank's own rows' loss
            max_world, families=["clip"], logit_bias=False, unequal_batches=False,
            reported_loss="rank-local" if self.options["local_loss"] else None,
            extension_keys=["dtype", "family"])

    def clip_loss(self, ctx, image, text, logit_scale, logit_bias):
        clip_loss = self.module.ClipLoss(**self.options, rank=ctx.dp_rank, world_size=ctx.dp,
                                         cache_labels=False)
        return clip_loss(image, text, logit_scale)


def make(**options):
    return OpenClipAdapter(**options)
