#!/usr/bin/env python3
"""open_clip's real ClipLoss under real DDP, against the strategy matrix.

Loads `src/open_clip/loss.py` from a checkout of mlfoundations/open_clip (by
default ../shared/third_party/open_clip beside the repository or one of its
parent folders; never copied)
and runs its four option combinations (local_loss x gather_with_grad) under
torch DistributedDataParallel on gloo (CPU, loopback, P processes), with two
towers (linear maps, L2-normalised, float64) and a learnable logit scale
stored as its log, as open_clip's CLIP model stores it. Every rank holds a
different, equally sized batch. After one backward, the DDP-reduced gradient
of each parameter group (the two towers together; the log logit scale) is
compared with the full-batch gradient of the same loss on one process
(ClipLoss with world_size 1 over every rank's pairs):
ratio = <g, g_ref> / <g_ref, g_ref>, residual = |g - ratio g_ref| / |g_ref|.

The predictions are those of step/strategy.hpp (docs/strategies.md) for
    local_loss=False gather_with_grad=False  detached-own-live/global/scale-1/mean
    local_loss=True  gather_with_grad=False  detached/local/scale-1/mean
    local_loss=False gather_with_grad=True   autograd/global/scale-1/mean
    local_loss=True  gather_with_grad=True   autograd/local/scale-1/mean
Exit: 0 every cell as predicted, 1 a cell differs, 2 bad arguments, 77 torch or
open_clip's loss.py not available.
"""

import argparse
import datetime
import importlib.util
import os
import pathlib
import queue
import socket
import sys
import time
import types

try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as torch_mp
except ImportError as error:  # pragma: no cover - depends on the machine
    print(f"SKIPPED: torch not importable ({error}); use the venv: .venv/bin/python (scripts/python-env.sh)", file=sys.stderr)
    sys.exit(77)

REPO = pathlib.Path(__file__).resolve().parents[2]


def default_open_clip():
    # ../shared/third_party/open_clip beside the repository (or beside a
    # worktree's parent folder), the first that exists.
    for parent in REPO.parents:
        candidate = parent / "shared" / "third_party" / "open_clip"
        if candidate.is_dir():
            return candidate
    return REPO.parent / "shared" / "third_party" / "open_clip"


DEFAULT_OPEN_CLIP = default_open_clip()
LOG_SCALE = 2.6592600369327779  # log(1 / 0.07), CLIP's initial value

# (local_loss, gather_with_grad) -> strategy point, prediction (encoders, logit scale)
# for P ranks: a number is the ratio, None is "no single ratio".
def predictions(p):
    return {
        (False, False): ("detached-own-live/global/scale-1/mean", 1.0 / p, 1.0),
        (True, False): ("detached/local/scale-1/mean", None, 1.0),
        (False, True): ("autograd/global/scale-1/mean", 1.0, 1.0),
        (True, True): ("autograd/local/scale-1/mean", 1.0, 1.0),
    }


def load_loss_module(open_clip_dir):
    path = pathlib.Path(open_clip_dir) / "src" / "open_clip" / "loss.py"
    if not path.is_file():
        print(f"SKIPPED: open_clip's loss.py not found at {path}", file=sys.stderr)
        sys.exit(77)
    if not hasattr(torch, "compiler"):
        # torch < 2.1 has no torch.compiler; loss.py uses torch.compiler.disable
        # only as a decorator that keeps torch.compile away from an unrelated
        # function (fused_linear_cross_entropy). In eager mode it is the
        # identity: a stand-in with that semantics, as for ms-swift's imports.
        torch.compiler = types.SimpleNamespace(
            disable=lambda fn=None, **_: fn if fn is not None else (lambda f: f))
    spec = importlib.util.spec_from_file_location("open_clip_loss_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, path


class Towers(torch.nn.Module):
    def __init__(self, image_features, text_features, dim, seed):
        super().__init__()
        generator = torch.Generator().manual_seed(seed)
        self.image = torch.nn.Linear(image_features, dim, bias=False).double()
        self.text = torch.nn.Linear(text_features, dim, bias=False).double()
        with torch.no_grad():
            self.image.weight.copy_(0.7 * torch.randn(dim, image_features, generator=generator,
                                                      dtype=torch.float64))
            self.text.weight.copy_(0.7 * torch.randn(dim, text_features, generator=generator,
                                                     dtype=torch.float64))
        self.logit_scale = torch.nn.Parameter(torch.tensor(LOG_SCALE, dtype=torch.float64))

    def forward(self, x_image, x_text):
        image = torch.nn.functional.normalize(self.image(x_image), dim=-1)
        text = torch.nn.functional.normalize(self.text(x_text), dim=-1)
        return image, text, self.logit_scale.exp()


def batches(world, pairs, image_features, text_features, seed):
    generator = torch.Generator().manual_seed(seed + 1)
    return [(torch.randn(pairs, image_features, generator=generator, dtype=torch.float64),
             torch.randn(pairs, text_features, generator=generator, dtype=torch.float64))
            for _ in range(world)]


def groups(model):
    encoders = torch.cat([model.image.weight.grad.flatten(), model.text.weight.grad.flatten()])
    return {"encoders": encoders, "logit_scale": model.logit_scale.grad.flatten()}


def measure(got, want):
    norm = want.norm().item()
    ratio = (got @ want).item() / (want @ want).item()
    residual = (got - ratio * want).norm().item() / norm
    return ratio, residual


def reference_gradients(loss_module, args):
    model = Towers(args.image_features, args.text_features, args.dim, args.seed)
    data = batches(args.world, args.pairs, args.image_features, args.text_features, args.seed)
    x_image = torch.cat([d[0] for d in data])
    x_text = torch.cat([d[1] for d in data])
    loss = loss_module.ClipLoss(rank=0, world_size=1)(*model(x_image, x_text))
    loss.backward()
    return {k: v.clone() for k, v in groups(model).items()}


def rank_main(rank, args, port, results):
    # Loopback only, one thread per rank (2 cores shared by several jobs).
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    torch.set_num_threads(1)
    try:
        loss_module, _ = load_loss_module(args.open_clip)
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=args.world, timeout=datetime.timedelta(seconds=60))
    except Exception as error:  # reported by the parent as one line
        results.put((rank, f"{type(error).__name__}: {error}"))
        return
    try:
        data = batches(args.world, args.pairs, args.image_features, args.text_features, args.seed)
        # DDP reduces on a group of its own: its bucket all-reduce runs from backward hooks,
        # and the autograd engine may order it differently on each rank against the backward
        # of ClipLoss's autograd gather on the default group; on one group the two ranks then
        # wait in different collectives (a hang seen 1 run in 3 on torch 2.13).
        ddp_group = dist.new_group(list(range(args.world)))
        out = {}
        for local_loss, gather_with_grad in predictions(args.world):
            model = Towers(args.image_features, args.text_features, args.dim, args.seed)
            ddp = torch.nn.parallel.DistributedDataParallel(model, process_group=ddp_group)
            clip_loss = loss_module.ClipLoss(local_loss=local_loss,
                                             gather_with_grad=gather_with_grad, rank=rank,
                                             world_size=args.world)
            loss = clip_loss(*ddp(*data[rank]))
            loss.backward()
            # Plain floats through the queue (no shared-memory tensors).
            out[(local_loss, gather_with_grad)] = {
                k: v.tolist() for k, v in groups(model).items()}
        results.put((rank, out))
    except Exception as error:
        results.put((rank, f"{type(error).__name__}: {error}"))
    finally:
        dist.destroy_process_group()


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--open-clip", default=str(DEFAULT_OPEN_CLIP),
                        help="an open_clip checkout (default: %(default)s)")
    parser.add_argument("--world", type=int, default=2, help="DDP ranks P (default 2)")
    parser.add_argument("--pairs", type=int, default=4, help="pairs per rank (default 4)")
    parser.add_argument("--dim", type=int, default=3)
    parser.add_argument("--image-features", type=int, default=5)
    parser.add_argument("--text-features", type=int, default=4)
    parser.add_argument("--seed", type=int, default=13)
    args = parser.parse_args()
    if args.world < 2 or args.pairs < 2:
        print("--world and --pairs must be at least 2", file=sys.stderr)
        return 2
    loss_module, path = load_loss_module(args.open_clip)
    reference = reference_gradients(loss_module, args)

    context = torch_mp.get_context("spawn")
    results = context.Queue()
    port = free_port()
    processes = [context.Process(target=rank_main, args=(r, args, port, results))
                 for r in range(args.world)]
    for p in processes:
        p.start()
    gathered = {}
    deadline = time.monotonic() + 180
    while len(gathered) < args.world:
        try:
            rank, out = results.get(timeout=1.0)
        except queue.Empty:  # a rank died or hung: say so, do not hang
            dead = [r for r, p in enumerate(processes) if not p.is_alive() and r not in gathered]
            if dead or time.monotonic() > deadline:
                why = f"rank {dead[0]} died" if dead else "no result within 180 s"
                print(f"DDP run failed: {why}", file=sys.stderr)
                for p in processes:
                    p.kill()
                return 1
            continue
        if isinstance(out, str):
            print(f"DDP rank {rank} failed: {out}", file=sys.stderr)
            for p in processes:
                p.kill()
            return 1
        gathered[rank] = {combo: {k: torch.tensor(v, dtype=torch.float64) for k, v in g.items()}
                          for combo, g in out.items()}
    for p in processes:
        p.join(timeout=60)
        if p.exitcode != 0:
            print(f"a DDP rank exited with {p.exitcode}", file=sys.stderr)
            return 1

    print(f"open_clip ClipLoss from {path}")
    print(f"torch {torch.__version__}, gloo, P = {args.world} ranks x {args.pairs} pairs, "
          f"float64, learnable log logit scale")
    print(f"{'local_loss':>10} {'gather_with_grad':>16}  {'strategy point':38} {'group':11} "
          f"{'measured':>38}  {'predicted':>16}  verdict")
    failures = 0
    for combo, (point, want_encoders, want_scale) in predictions(args.world).items():
        # DDP leaves every rank the same reduced gradient; check that too.
        for rank in range(1, args.world):
            for k in reference:
                if not torch.equal(gathered[rank][combo][k], gathered[0][combo][k]):
                    print(f"rank {rank} and rank 0 disagree on {k} for {combo}")
                    failures += 1
        for group, want in (("encoders", want_encoders), ("logit_scale", want_scale)):
            ratio, residual = measure(gathered[0][combo][group], reference[group])
            if want is None:
                ok = residual > 1e-3
                measured = f"ratio {ratio:.4g} (residual {residual:.3g})"
                predicted = "no single ratio"
            else:
                ok = abs(ratio - want) <= 1e-9 * max(1.0, abs(want)) and residual <= 1e-9
                measured = f"ratio {ratio:.12g} (residual {residual:.1e})"
                predicted = f"ratio {want:.6g}"
            failures += 0 if ok else 1
            print(f"{str(combo[0]):>10} {str(combo[1]):>16}  {point:38} {group:11} "
                  f"{measured:>38}  {predicted:>16}  {'as predicted' if ok else 'DIFFERS'}")
    print("all as predicted" if failures == 0 else f"{failures} cell(s) differ from the prediction")
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
