"""The `ms-swift` adapter: ms-swift's real InfonceLoss (swift/loss/embedding.py) on one rank.

The trainer's file is loaded from a path (`swift_root`/swift/loss/`swift_file`, by default
the installed `swift` package's, else the first layered site: INFONCE_SWIFT_SITES or the
checkout's .venv-swift, `_loading.layered_sites`) and never edited or copied. The adapter
does not import the package: its `get_dist_setting` reads RANK/WORLD_SIZE from the process
environment and accelerate's `gather_object` needs accelerate's state, neither of which
serves virtual ranks. The file's
imports get small stand-ins with the same semantics, present while it loads
(../shared/third_party/README.md; `_standins`):

- accelerate.utils.gather_object: all-gather a list from every rank, flatten one level;
- transformers.utils.strtobool;
- swift.utils.get_dist_setting(): (rank, local_rank, world_size, local_world_size);
- swift.sequence_parallel.sequence_parallel: the trainer's SP subgroup path. With
  replicas (R > 1) it holds the rank's DP group and DP rank, so the trainer gathers
  over the DP group and puts its rows in its DP slot; with R = 1 `dp_group` is None
  and the trainer takes accelerate's path over the world;
- swift.loss.base.BaseLoss (is_megatron False: the HF/DDP path).

They call torch.distributed, so the same stand-ins serve the in-process runtime
(whose torch.distributed answers for the virtual rank) and real DDP.

The loss reads its settings from INFONCE_* environment variables on every call; the
adapter sets them from the case. Hard-negative padding: the module's `np` is replaced (in
the loaded module's namespace only) by a view of numpy whose `random.choice` replays the
case's `padding_draws` or draws with numpy's global generator (per rank under the in-process
runtime), and records what it handed out. The handshake's `padding` is the file's own,
asked of its `_parse_multi_negative_sentences` (`_kit.padding_of`).

Options: `hard_negatives=false` narrows the check; `min_dim=2` declares in the handshake that
the file cannot run D = 1. Known finding: the batched global path does
`sentences[:, 0].squeeze(1)`, which at D = 1 squeezes the embedding axis and crashes
(IndexError). By default the handshake does not hide it: check --sut finds it and shrinks it
to W = 1, F = D = 1.
"""

from . import _kit, _loading, _standins

# The field table (python -m infonce_sim.field). ms-swift is not installed into the main venv:
# ms-swift 4.6.0 pulls 86 packages (~800 MB) and transformers < 5.20, where
# sentence-transformers 6.3.0 has 5.25. scripts/python-env-swift.sh installs it into a layered
# venv, .venv-swift; without any install, the shared copies of the file. Each also with
# min_dim=2 (the D = 1 crash declared), so the gradient is judged too.
PACKAGE = "ms-swift"
CONFIGURATIONS = _kit.also_with({"min_dim": "2"}, [
    {"_label": "InfonceLoss (installed embedding.py)"} if site is None else
    {"swift_root": site, "_version": version,
     "_label": f"InfonceLoss (embedding.py installed in {venv})"}
    for site, version, venv in _loading.installs(PACKAGE, "swift/loss/embedding.py")
] or [
    {"swift_root": str(_loading.shared_third_party("ms-swift")), "swift_file": name,
     "_version": "file @ 3602360a (shared copy)", "_label": f"InfonceLoss ({name})"}
    for name in ("embedding.py", "embedding_fixed.py")
    if (_loading.shared_third_party("ms-swift") / "swift/loss" / name).is_file()])

SETTINGS = ("temperature", "use_batch", "hard_negatives", "mask_fake_negative",
            "fake_neg_margin", "include_qq", "include_dd")  # the file reads INFONCE_<SETTING>
STANDINS = dict(_standins.LIBRARIES, **{
    "swift.utils": {"get_dist_setting": _standins.get_dist_setting},
    "swift.loss.base": {"BaseLoss": type("BaseLoss", (), {"is_megatron": False})},
    "swift.sequence_parallel": {"sequence_parallel": _standins.RankAttributes(
        dp_group=lambda ctx: ctx.dp_group if ctx.replicas > 1 else None,
        dp_rank=lambda ctx: ctx.dp_rank, dp_world_size=lambda ctx: ctx.dp,
        _gather_object_dp=lambda ctx: lambda obj: _standins.gather_object(obj, ctx.dp_group))}})


class MsSwiftAdapter:
    def __init__(self, swift_root=None, swift_file="embedding.py", max_world=8, max_replicas=2,
                 min_dim=None, hard_negatives=True, **_):
        self.path = _loading.source_file(f"swift/loss/{swift_file}", swift_root,
                                         hint="give --swift-root DIR")
        self.module = _loading.load_file(self.path, f"swift.loss.{self.path.stem}", STANDINS)
        self.module.np = _standins.NUMPY_REPLAYING_DRAWS  # its namespace only: the file as it is
        self.loss_fn, self.name = self.module.InfonceLoss(), f"ms-swift InfonceLoss ({self.path})"
        self.supports = _kit.handshake(
            max_world, max_replicas=max_replicas, use_batch=[True, False], gathers=["object"],
            padding=[_kit.padding_of(self.module._parse_multi_negative_sentences, self.path)],
            hard_negatives=_kit.boolean(hard_negatives, "hard_negatives"), include_qq=True,
            include_dd=True, mask_fake_negative=True, rng_modes=["synced", "per-rank"],
            replays_padding_draws=True, extension_keys=["dtype", "accumulation.window"],
            min_dim=None if min_dim is None else int(min_dim))

    def loss(self, ctx, embeddings, labels):
        _kit.set_environment("INFONCE_", ctx.case.loss, SETTINGS)
        with _standins.running(ctx, "ms-swift InfonceLoss"):
            return self.loss_fn({"last_hidden_state": embeddings}, labels)


make = MsSwiftAdapter
