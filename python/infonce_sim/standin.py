"""torch.distributed stand-ins for the in-process runtime (thread mode).

While `installed(world)` is active, the functions a trainer calls on
`torch.distributed` (and `torch.distributed.nn.all_gather`) answer for the
virtual rank holding the baton: get_rank, get_world_size, is_initialized,
is_available, new_group, all_gather, all_gather_object, all_reduce, barrier,
broadcast_object_list, and accelerate-style `gather_object` (gather, then flatten
one level) is provided here for adapters' import stand-ins. Outside, the real
functions are back.
"""

import contextlib

import torch
import torch.distributed as dist

_world = None  # the World of the case being run


def _active():
    if _world is None or _world.current is None:
        raise RuntimeError("torch.distributed stand-in called outside an in-process rank")
    return _world


def _rank():
    return _active().current.world_rank


def is_available():
    return True


def is_initialized():
    return _world is not None


def get_backend(group=None):
    return "infonce-inprocess"


def get_rank(group=None):
    world = _active()
    group = world.resolve(group)
    return group.index.get(world.current.world_rank, -1)


def get_world_size(group=None):
    return _active().resolve(group).size()


def new_group(ranks=None, timeout=None, backend=None, pg_options=None):
    world = _active()
    return world.world_group if ranks is None else world.group(sorted(ranks))


def barrier(group=None, async_op=False, device_ids=None):
    _active().collective_blocking("barrier", group, None)


def all_gather_object(object_list, obj, group=None):
    world = _active()
    size = world.resolve(group).size()
    if len(object_list) != size:
        raise ValueError(f"all_gather_object: output list has {len(object_list)} entries, "
                         f"the group {size}")
    gathered = world.collective_blocking("all_gather_object", group, obj)
    object_list[:] = gathered


def all_gather(tensor_list, tensor, group=None, async_op=False):
    world = _active()
    size = world.resolve(group).size()
    if len(tensor_list) != size:
        raise ValueError(f"all_gather: output list has {len(tensor_list)} tensors, the group {size}")
    gathered = world.collective_blocking("all_gather", group, tensor.detach())
    for out, got in zip(tensor_list, gathered):
        if out.shape != got.shape:
            raise ValueError(f"all_gather: output tensor of shape {list(out.shape)}, "
                             f"input {list(got.shape)}")
        out.copy_(got)
    return _DoneWork() if async_op else None


_REDUCE_OPS = {}


def _reduce_op_name(op):
    if not _REDUCE_OPS:
        _REDUCE_OPS.update({dist.ReduceOp.SUM: "sum", dist.ReduceOp.MAX: "max",
                            dist.ReduceOp.MIN: "min", dist.ReduceOp.PRODUCT: "product"})
    try:
        return _REDUCE_OPS[op]
    except (KeyError, TypeError):
        raise ValueError(f"all_reduce: unsupported op {op}") from None


def all_reduce(tensor, op=dist.ReduceOp.SUM, group=None, async_op=False):
    world = _active()
    total = world.collective_blocking("all_reduce", group, tensor.detach().clone(),
                                      _reduce_op_name(op))
    with torch.no_grad():
        tensor.copy_(total)
    return _DoneWork() if async_op else None


def broadcast_object_list(object_list, src=0, group=None, device=None):
    world = _active()
    gathered = world.collective_blocking("all_gather_object", group, list(object_list))
    index = world.resolve(group).index[src]
    object_list[:] = gathered[index]


class _DoneWork:
    def wait(self, timeout=None):
        return True

    def is_completed(self):
        return True


class _AllGatherWithGrad(torch.autograd.Function):
    """torch.distributed.nn.all_gather: backward sums every rank's gradient for my slot."""

    @staticmethod
    def forward(ctx, group, tensor):
        ctx.group = group
        world = _active()
        return tuple(world.collective_blocking("all_gather", group, tensor.detach()))

    @staticmethod
    def backward(ctx, *grads):
        world = _active()
        parts = [g.detach().clone() if g is not None else None for g in grads]
        like = next((g for g in parts if g is not None), None)
        parts = [torch.zeros_like(like) if g is None else g for g in parts]
        mine = world.collective_blocking("reduce_scatter", ctx.group, parts)
        return (None, mine)


def nn_all_gather(tensor, group=None):
    """torch.distributed.nn.all_gather(tensor, group): differentiable, one tensor per member."""
    group = _active().resolve(group)
    return _AllGatherWithGrad.apply(group, tensor)


def gather_object(obj):
    """accelerate.utils.gather_object: gather every rank's list over the world, flatten once."""
    if torch.distributed.get_world_size() == 1:
        return obj if isinstance(obj, list) else list(obj)
    out = [None] * torch.distributed.get_world_size()
    torch.distributed.all_gather_object(out, obj)
    return [x for y in out for x in y]


_PATCHED = ("is_available", "is_initialized", "get_backend", "get_rank", "get_world_size",
            "new_group", "barrier", "all_gather_object", "all_gather", "all_reduce",
            "broadcast_object_list")


@contextlib.contextmanager
def installed(world):
    """Replace torch.distributed's functions by the stand-ins for the duration of a case."""
    global _world
    import torch.distributed.nn as dist_nn
    import torch.distributed.nn.functional as dist_nn_functional

    saved = {name: getattr(dist, name) for name in _PATCHED}
    saved_nn = (dist_nn.all_gather, dist_nn_functional.all_gather)
    _world = world
    try:
        for name in _PATCHED:
            setattr(dist, name, globals()[name])
        dist_nn.all_gather = nn_all_gather
        dist_nn_functional.all_gather = nn_all_gather
        yield
    finally:
        for name, fn in saved.items():
            setattr(dist, name, fn)
        dist_nn.all_gather, dist_nn_functional.all_gather = saved_nn
        _world = None
