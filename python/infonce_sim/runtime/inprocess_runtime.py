"""The in-process runtime's entry point: InProcessRuntime runs a case on the virtual ranks
of inprocess.World (the scheduler; its doc says how), a generator adapter's ranks in turn
without threads, a plain function's on rank threads with the in-process torch.distributed
backend (backend.py); a case with issue 13's keys or another family through families.py."""

import itertools

import torch

from ..cases.spec import tensor_of
from . import backend, families
from .inprocess import RandomStates, World, backward_scalars, blocking_fulfil, reduce_gradients
from .rank import RankContext, drive, is_generator_adapter, rank_program


class InProcessRuntime:
    """Runs cases on virtual ranks; keeps one World per world size."""

    name = "in-process"

    def __init__(self):
        self.worlds = {}

    def world(self, size):
        if size not in self.worlds:
            self.worlds[size] = World(size)
        return self.worlds[size]

    def run(self, adapter, case, replays_draws=True):
        """{losses, grad, grads, padding_draws} of one case (raises on a failed step)."""
        if families.of(case) is not None:  # a strategy, a learnable temperature, CLIP
            return families.run_inprocess(self, adapter, case, replays_draws)

        world = self.world(case.world)
        for rank in world.ranks:
            rank.reset()
        world._seed_rng(case, getattr(adapter, "random_generators", RandomStates.GENERATORS))
        dtype = torch.float64 if case.dtype == "float64" else torch.float32
        weight = tensor_of(itertools.chain.from_iterable(case.weight), dtype).reshape(
            len(case.weight), len(case.weight[0]))
        inputs = {}  # (micro, DP shard) -> (x, labels): replicas read the same input tensors
        contexts = [
            RankContext(case, w, model, world.dp_group(case, w % case.replicas), replays_draws,
                        inputs)
            for w, model in enumerate(world.replicas(weight))
        ]
        threaded = not is_generator_adapter(adapter)
        if threaded:
            programs = [_blocking_program(adapter, ctx, world) for ctx in contexts]
            with backend.installed(world):
                losses = world.run_ranks(programs, threaded=True)
        else:
            # Backward after every rank's last micro-step (accumulation sends nothing before,
            # and nothing reads a gradient in between): one autograd call per micro-step for
            # all ranks, in micro-step order, so each replica accumulates as it would alone.
            roots = [[None] * case.world for _ in range(case.steps)]

            def defer(ctx):
                def backward(micro, scalar):
                    roots[micro][ctx.world_rank] = scalar
                return backward

            losses = world.run_ranks(
                [rank_program(adapter, ctx, backward=defer(ctx), generator=True)
                 for ctx in contexts], threaded=False)
            for micro_roots in roots:
                backward_scalars(micro_roots)
        grads = reduce_gradients(case, [ctx.model.weight.grad for ctx in contexts])
        return {
            "losses": losses,
            "grad": grads[0],
            "grads": grads,
            "padding_draws": [[ctx.draws[m] for ctx in contexts] for m in range(case.steps)],
        }

    def close(self):
        for world in self.worlds.values():
            world.close()
        self.worlds.clear()


def _blocking_program(adapter, ctx, world):
    """Thread mode: the rank program, its yields (if any) fulfilled by blocking collectives."""

    def run():
        backend.bind_thread(world, ctx)
        return drive(rank_program(adapter, ctx), blocking_fulfil(world))

    return run
