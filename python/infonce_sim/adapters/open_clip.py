"""The `open-clip` adapter: open_clip's real ClipLoss (src/open_clip/loss.py) on one rank.

The file is loaded from the user's copy, never edited or copied: `open_clip_root`
(`--open-clip-root DIR`: DIR/src/open_clip/loss.py), or `open_clip_file` (`--option
open_clip_file=PATH`), or by default the installed `open_clip` package's `loss.py`, found
with importlib.util.find_spec and executed by path (`import open_clip` would run the
package's __init__, which imports torchvision; loss.py needs only torch).
At mlfoundations/open_clip commit 89fb801f the file decorates an unrelated function with
`torch.compiler.disable`, which torch < 2.1 lacks; where it is missing the adapter puts
an identity decorator there (the eager-mode semantics of that decorator) before loading.

Each rank calls, per micro-step,
    ClipLoss(local_loss=..., gather_with_grad=..., rank=dp_rank, world_size=P,
             cache_labels=False)(image_features, text_features, logit_scale)
with logit_scale = exp(the replica's learnable log logit scale). ClipLoss gathers with
torch.distributed's default group, which is the DP group only when there are no
replicas: the adapter declares max_replicas 1. Its strategy is baked into its options
(docs/strategies.md): default detached-own-live/global/scale-1/mean, `local_loss`
detached/local/scale-1/mean, `gather_with_grad` autograd/global/scale-1/mean, both
autograd/local/scale-1/mean. So it declares neither `strategy` nor `compensate_false`,
only the mean reduction, and no logit bias (ClipLoss is called without one). Its
gathers need the same number of pairs on every shard (dist.all_gather of
zeros_like(own features)) and its local targets are `n * rank`: with unequal shards it
fails or points at other rows, as open_clip does.
"""

import pathlib
import types

import torch

from ..case import CaseError
from ._kit import boolean as _boolean
from ._loading import load_file, package_dir



def _compiler_stand_in():
    """torch.compiler.disable as an identity decorator, where torch has no torch.compiler."""
    if not hasattr(torch, "compiler"):
        torch.compiler = types.SimpleNamespace(
            disable=lambda fn=None, **_: fn if fn is not None else (lambda f: f))


def load_loss_module(open_clip_root=None, open_clip_file=None):
    """open_clip's loss module from a path; by default the installed package's loss.py (found
    with find_spec, executed by path: the package's __init__ imports torchvision)."""
    _compiler_stand_in()
    if open_clip_root and open_clip_file:
        raise ValueError("give open_clip_root or open_clip_file, not both")
    if open_clip_root:
        path = pathlib.Path(open_clip_root) / "src" / "open_clip" / "loss.py"
    elif open_clip_file:
        path = pathlib.Path(open_clip_file)
    else:
        installed = package_dir("open_clip")
        if installed is None:
            raise ValueError("open_clip is not installed (pip install open-clip-torch --no-deps):"
                             " give --open-clip-root DIR or --option open_clip_file=PATH")
        path = installed / "loss.py"
    if not path.is_file():
        raise ValueError(f"open_clip's loss.py not found at {path}")
    return load_file(path, "open_clip_loss_under_test"), path


def strategy_point(local_loss, gather_with_grad):
    """The options' point of docs/strategies.md."""
    gather = "autograd" if gather_with_grad else ("detached" if local_loss else
                                                  "detached-own-live")
    return f"{gather}/{'local' if local_loss else 'global'}/scale-1/mean"


# The field table (python -m infonce_sim.field): the distribution, and ClipLoss's four option
# combinations (--option KEY=VALUE each) with their strategy points.
PACKAGE = "open-clip-torch"
CONFIGURATIONS = [{"local_loss": str(local).lower(), "gather_with_grad": str(grad).lower(),
                   "_point": strategy_point(local, grad)}
                  for local in (False, True) for grad in (False, True)]


class OpenClipAdapter:
    def __init__(self, open_clip_root=None, open_clip_file=None, local_loss=False,
                 gather_with_grad=False, max_world=8, max_replicas=1, **_):
        self.module, self.path = load_loss_module(open_clip_root, open_clip_file)
        self.local_loss = _boolean(local_loss, "local_loss")
        self.gather_with_grad = _boolean(gather_with_grad, "gather_with_grad")
        self.point = strategy_point(self.local_loss, self.gather_with_grad)
        self.name = (f"open_clip ClipLoss ({self.path}; local_loss={self.local_loss}, "
                     f"gather_with_grad={self.gather_with_grad}: {self.point})")
        self.supports = {
            "families": ["clip"],
            "logit_bias": False,
            # ClipLoss's all_gather needs one shape on every rank, and its local
            # targets are n * rank: equal shards only.
            "unequal_batches": False,
            "use_batch": [True],
            "reductions": ["mean"],
            "gathers": ["object", "tensor"],  # ClipLoss gathers its own way: either is run
            "dtypes": ["float64", "float32"],
            "max_world": int(max_world),
            "max_replicas": 1,
            "compensate_false": False,
            "accumulation_normalize": [True, False],
            "extension_keys": ["dtype", "family"],
        }

    def loss(self, ctx, embeddings, labels):
        raise CaseError("open_clip's ClipLoss runs CLIP cases only (family clip)")

    def clip_loss(self, ctx, image, text, logit_scale, logit_bias):
        if logit_bias is not None:
            raise CaseError("clip.logit_bias: this adapter calls ClipLoss without a bias")
        if ctx.replicas != 1:
            raise CaseError("mesh: ClipLoss gathers over the default group; replicas are "
                            "outside this adapter (max_replicas 1)")
        clip_loss = self.module.ClipLoss(local_loss=self.local_loss,
                                         gather_with_grad=self.gather_with_grad,
                                         rank=ctx.dp_rank, world_size=ctx.dp,
                                         cache_labels=False)
        return clip_loss(image, text, logit_scale)


def make(**options):
    return OpenClipAdapter(**options)
