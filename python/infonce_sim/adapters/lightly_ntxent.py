"""`lightly`: lightly's real NTXentLoss(gather_distributed=True), loaded, and NOT run: no family
of today's case format expresses it (the NT-Xent family is SPEC section 14, not yet built).

Loading: `lightly/loss/ntx_ent_loss.py` imports `lightly.models.modules.memory_bank` (which
imports `lightly.models.utils`, whose first lines import `torchvision.ops.StochasticDepth`)
and `lightly.utils.dist`; `import lightly` runs `lightly/__init__`, which imports torchvision,
and PyPI's torchvision 0.28.0 does not load beside the CPU torch 2.13.0 ("operator
torchvision::nms does not exist"). `_loading.bare_packages` runs the installed files
themselves with `lightly`, `lightly.loss`, `lightly.models`, `lightly.models.modules` and
`lightly.utils` as bare packages (their `__path__`, no `__init__` run), and a stand-in
`torchvision.ops.StochasticDepth` (raises if constructed; the loss never does) present only
while the files load.

Why it is not run (`NOT_EXPRESSIBLE`): NTXentLoss(out0, out1) has 2n query rows per rank,
BOTH views, each against the other view's gathered rows (positive at rank * n + i) and its
own view's gathered rows without itself, CE averaged over the 2n rows. The InfoNCE family
with groups [x, x'] (no negatives), use_batch and include_qq is exactly the first n rows
(view 0 as queries: L0); it has no rows with a document as query (include_dd adds p . docs
to the query's own row), so lightly's (L0 + L1) / 2 is not an InfoNCE case, and no call of
the symmetric loss isolates L0. The CLIP family has both directions as rows but no same-view
negatives, two towers and a logit scale for one encoder and 1/T. lightly's distributed
strategy itself (GatherLayer: all_gather, all_reduce of the slots' gradients; local rows,
targets rank * n) is the point autograd/local/scale-1/mean, which the harness has.
"""

from ._loading import bare_packages, package_dir

PACKAGE = "lightly"
CONFIGURATIONS = []  # none runs until the NT-Xent family (SPEC 14) exists
NOT_EXPRESSIBLE = ("NTXentLoss(gather_distributed=True) averages both views' rows (2n per rank, "
                   "same-view negatives): the NT-Xent family, SPEC section 14, is not built; "
                   "InfoNCE + include_qq is one direction only, CLIP lacks same-view negatives")


class _StochasticDepth:  # torchvision.ops.StochasticDepth while lightly.models.utils loads
    def __init__(self, *_, **__):
        raise ImportError("torchvision is not importable here (stand-in of infonce_sim)")


def load_ntxent():
    """The installed lightly's NTXentLoss class (its own file, run as it is)."""
    directory = package_dir("lightly")
    if directory is None:
        raise ValueError("lightly is not installed (pip install lightly --no-deps)")
    standins = {"torchvision": {}, "torchvision.ops": {"StochasticDepth": _StochasticDepth}}
    with bare_packages("lightly", directory, standins) as import_module:
        return import_module("lightly.loss.ntx_ent_loss").NTXentLoss


def make(**_):
    load_ntxent()  # installed and importable: the reason below is the family, not the import
    raise ValueError(f"--adapter lightly: {NOT_EXPRESSIBLE}")
