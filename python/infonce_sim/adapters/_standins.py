"""Stand-ins for a trainer file's imports that answer for the rank whose loss is running.

A trainer's loss file loaded by path (`_loading.load_file(path, name, standins)`) may import
what is not installed, or what cannot serve virtual ranks (accelerate's state, a launcher's
environment). Its stand-ins must know which rank calls them: `running(ctx, label)` wraps the
call of the trainer's loss, and inside it `running_rank()` is that rank's RankContext (one
per thread: the in-process runtime runs each rank on its own thread).

- `running(ctx, label)`: the context of one call of the trainer's loss (below);
- `RankAttributes(**getters)`: an object whose attributes are computed from the running
  rank (None outside a rank), e.g. a sequence-parallel state object;
- `NUMPY_REPLAYING_DRAWS`: numpy as a trainer module sees it (`module.np = ...`), except that
  `np.random.choice` replays the case's recorded padding draws, or draws with numpy's global
  generator (per rank in-process), and records what it handed out in `ctx.draws`;
- `LIBRARIES`: stand-ins of common libraries' helpers a trainer's loss imports
  (accelerate.utils.gather_object, transformers.utils.strtobool);
- `get_dist_setting()`: (rank, local_rank, world_size, local_world_size) on one node.
"""

import contextlib
import threading

import numpy as np
import torch.distributed

from ..cases.case import CaseError
from ..runtime.standin import gather_object

_current = threading.local()  # .ctx: the RankContext whose loss runs on this thread


def running_rank():
    """The RankContext whose trainer loss runs on this thread, or None."""
    return getattr(_current, "ctx", None)


@contextlib.contextmanager
def running(ctx, label: str):
    """One call of the trainer's loss for `ctx`: the stand-ins answer for it, its replayed
    draws are handed out from the first (`ctx.draws_used`), a failure of the trainer's own is
    the step's RuntimeError naming `label` (a CaseError stays one), and replayed draws left
    unused afterwards are the case's error."""
    ctx.draws_used = 0
    _current.ctx = ctx
    try:
        yield ctx
    except CaseError:
        raise
    except Exception as e:  # the trainer's own failure: the step's error
        raise RuntimeError(f"{label} raised {type(e).__name__}: {e}") from e
    finally:
        _current.ctx = None
    replayed = ctx.replayed_draws()
    if replayed is not None and ctx.draws_used != len(replayed):
        raise CaseError(f"padding_draws[{ctx.micro}][{ctx.dp_rank}]: "
                        f"{len(replayed) - ctx.draws_used} draws left unused")


class RankAttributes:
    """Attributes computed from the running rank: `getters` maps a name to a function of the
    RankContext; outside a rank every attribute is None."""

    def __init__(self, **getters):
        self._getters = getters

    def __getattr__(self, name):
        getter = self.__dict__.get("_getters", {}).get(name)
        if getter is None:
            raise AttributeError(name)
        ctx = running_rank()
        return None if ctx is None else getter(ctx)


class _DrawingRandom:
    """numpy.random as the trainer sees it: `choice` replays or draws, and records."""

    def __getattr__(self, name):
        return getattr(np.random, name)

    @staticmethod
    def choice(a, size=None, replace=True, p=None):
        ctx = running_rank()
        if ctx is None:  # outside a rank (e.g. a probe at load time): numpy itself
            return np.random.choice(a, size=size, replace=replace, p=p)
        replayed = ctx.replayed_draws()
        if replayed is None:
            drawn = np.random.choice(a, size=size, replace=replace, p=p)
        else:
            drawn = _replay(ctx, replayed, len(a), size)
        ctx.draws[ctx.micro].extend(int(j) for j in np.asarray(drawn).flat)
        return drawn


def _replay(ctx, replayed, choices, size):
    """The next recorded draws, shaped as `size` asks; an index outside [0, choices) or too
    few left are the case's error."""
    used = ctx.draws_used
    count = int(np.prod(size)) if size is not None else 1
    if used + count > len(replayed):
        raise CaseError(f"padding_draws[{ctx.micro}][{ctx.dp_rank}]: ran out of draws")
    drawn = np.asarray(replayed[used:used + count], dtype=np.int64)
    if size is not None:
        drawn = drawn.reshape(size)
    ctx.draws_used = used + count
    if any(not 0 <= j < choices for j in drawn.flat):
        raise CaseError(f"padding_draws[{ctx.micro}][{ctx.dp_rank}]: an index outside "
                        f"[0, {choices})")
    return drawn


class _NumpyView:
    """A module's `np`: numpy, except `np.random` is _DrawingRandom."""

    random = _DrawingRandom()

    def __getattr__(self, name):
        return getattr(np, name)


NUMPY_REPLAYING_DRAWS = _NumpyView()


def strtobool(value) -> int:
    """transformers.utils.strtobool (distutils' semantics): 1, 0, or ValueError."""
    value = str(value).lower()
    if value in ("y", "yes", "t", "true", "on", "1"):
        return 1
    if value in ("n", "no", "f", "false", "off", "0"):
        return 0
    raise ValueError(f"invalid truth value {value!r}")


def get_dist_setting() -> tuple[int, int, int, int]:
    """(rank, local_rank, world_size, local_world_size) of a one-node launch."""
    rank, world = torch.distributed.get_rank(), torch.distributed.get_world_size()
    return rank, rank, world, world


LIBRARIES = {"accelerate.utils": {"gather_object": gather_object},
             "transformers.utils": {"strtobool": strtobool}}
