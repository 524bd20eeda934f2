"""`lightly`: lightly's real NTXentLoss(gather_distributed=True) on the NT-Xent family (SPEC
section 14): each rank calls NTXentLoss(temperature=T, gather_distributed=True)(z0, z1) on
its two views' embeddings.

lightly gathers both views with its GatherLayer over the default group (the world: one
replica per shard), takes its own 2n rows as queries against every gathered row, targets
at rank * n + i, and reports that rank-local loss: the point autograd/local/scale-1/mean,
exact with equal batches (which its targets assume). Before PR #1531 ("fix gatherlayer",
lightly 1.5.x) the GatherLayer's backward returned this rank's own slot of the incoming
gradient without summing over the ranks: the point detached-own-live/local/scale-1/mean.
`--option site=before-1531` loads that version, installed by scripts/python-env.sh with
`pip install --target VENV/lightly-1.5.0 --no-deps` (python/requirements/lightly-before-1531.txt);
`--option site=DIR` loads DIR/lightly.

NTXentLoss L2-normalises both views itself: a case with encoder normalisation off is
declined. Loading: `lightly/__init__` imports torchvision, which PyPI cannot pair with the CPU torch
here; `_loading.bare_packages` runs the loss's own files with the packages bare and a
stand-in `torchvision.ops.StochasticDepth` (raises if constructed; the loss never does).
"""

import pathlib
import sys

from . import _kit
from ._loading import bare_packages, package_dir

PACKAGE = "lightly"
CONFIGURATIONS = [{"_point": "autograd/local/scale-1/mean"},
                  {"site": "before-1531", "_point": "detached-own-live/local/scale-1/mean"}]


class _StochasticDepth:  # torchvision.ops.StochasticDepth while lightly.models.utils loads
    def __init__(self, *_, **__):
        raise ImportError("torchvision is not importable here (stand-in of infonce_sim)")


def load_ntxent(site=None):
    """lightly's NTXentLoss class and its directory: the installed package's, or DIR/lightly."""
    directory = pathlib.Path(site) / "lightly" if site else package_dir("lightly")
    if directory is None or not (directory / "loss" / "ntx_ent_loss.py").is_file():
        raise ValueError(f"no lightly at {site or 'the installed packages'} "
                         "(scripts/python-env.sh installs both)")
    standins = {"torchvision": {}, "torchvision.ops": {"StochasticDepth": _StochasticDepth}}
    with bare_packages("lightly", directory, standins) as import_module:
        return import_module("lightly.loss.ntx_ent_loss").NTXentLoss, directory


class LightlyAdapter(_kit.NtXentOnly):
    def __init__(self, site=None, max_world=8, **_):
        before = pathlib.Path(sys.prefix) / "lightly-1.5.0"
        self.ntxent, where = load_ntxent(before if site == "before-1531" else site)
        self.name = f"lightly NTXentLoss(gather_distributed=True) ({where})"
        # its targets are rank * n (equal batches); each rank reports its own rows' loss
        self.supports = _kit.ntxent_supports(max_world, unequal_batches=False,
                                             reported_loss="rank-local")

    def decline(self, case):
        return _kit.unnormalized(case, "lightly")

    def ntxent_loss(self, ctx, first, second):
        return self.ntxent(temperature=ctx.case.temperature, gather_distributed=True)(first, second)


def make(**options):
    return LightlyAdapter(**options)
