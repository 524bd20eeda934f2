"""The `open-clip-siglip` adapter: open_clip's real SigLipLoss (src/open_clip/loss.py) on the
SigLIP family (SPEC section 15).

The file is found and loaded as the `open-clip` adapter does (installed `open_clip`'s
loss.py executed by path, or `--open-clip-root DIR`, or `--option open_clip_file=PATH`).
Each rank calls, per micro-step,
    SigLipLoss(rank=dp_rank, world_size=P, dist_impl=...)(image, text, exp(log_scale), bias)
(open_clip's models pass the scale already exponentiated and the bias as it is). Every rank
scores its own images against its own texts, then against every other rank's texts, which
reach it by `--option dist_impl=`:
  * `bidir` (open_clip's default): batch_isend_irecv to both ring neighbours at once, with
    the reverse messages in the backward (NeighbourExchangeBidir), and a one-way step for
    an even P;
  * `shift`: P - 1 one-way ring steps (NeighbourExchange);
  * `reduce`: P torch.distributed.nn.all_reduce of one rank's texts (the others send 0);
  * `gather`: one torch.distributed.nn.all_gather.
It divides by its own number of pairs and reports that rank-local loss. Every impl talks on
torch.distributed's default group (the DP group only without replicas: max_replicas 1), and
receives into zeros_like(own texts) or all-gathers them: every shard must hold the same
number of pairs (`unequal_batches: false`), as open_clip assumes.
"""

from . import _kit, _loading

PACKAGE = "open-clip-torch"
DIST_IMPLS = ("bidir", "shift", "reduce", "gather")
# The field table: the texts reach every rank with their gradients' way back (an autograd
# gather of the texts), its own images against all of them, divided by its own pairs.
CONFIGURATIONS = [{"dist_impl": impl, "_point": "autograd/local/scale-1/mean"}  # every impl
                  for impl in ("bidir", "shift", "reduce", "gather")]


class OpenClipSiglipAdapter(_kit.SiglipOnly):
    def __init__(self, open_clip_root=None, open_clip_file=None, dist_impl="bidir", max_world=8,
                 **_):
        self.path = _loading.source_file(
            "open_clip/loss.py", open_clip_root and f"{open_clip_root}/src", open_clip_file,
            hint="pip install open-clip-torch --no-deps, or give --open-clip-root DIR or "
                 "--option open_clip_file=PATH")
        self.module = _loading.load_file(self.path, "open_clip_siglip_loss_under_test")
        self.dist_impl = _kit.choice(dist_impl, DIST_IMPLS, "dist_impl")
        self.name = f"open_clip SigLipLoss(dist_impl={dist_impl}) ({self.path})"
        # its ring receives into zeros_like(own texts); each rank reports its own images' loss
        self.supports = _kit.siglip_supports(max_world, unequal_batches=False,
                                             reported_loss="rank-local")

    def siglip_loss(self, ctx, image, text):
        siglip = self.module.SigLipLoss(rank=ctx.dp_rank, world_size=ctx.dp,
                                        dist_impl=self.dist_impl)
        return siglip(image, text, ctx.log_scale.exp(), ctx.bias)


def make(**options):
    return OpenClipSiglipAdapter(**options)
