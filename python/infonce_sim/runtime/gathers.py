"""The detached gathers of the generator adapters (the conformance adapter, strategic.py):
generators yielding rank.Collective, so the in-process scheduler or real DDP fulfils them.
Both hand every member the senders' tensors (shared: receivers only read them)."""

import torch

from ..cases.spec import tensor_of
from .rank import Collective


def gather_tensors(tensors, group):
    """Tensor path: all-gather the row counts first, then each zero-padded tensor."""
    rows = tensor_of([t.shape[0] for t in tensors], torch.int64)
    all_rows = yield Collective("all_gather", rows, group, shared=True)
    counts = [r.tolist() for r in all_rows]  # [member] -> rows of each tensor
    out = []
    for i, value in enumerate(tensors):
        longest = max(max(c[i] for c in counts), 1)  # gloo does not gather empty tensors
        gathered = yield Collective("all_gather", _padded(value, longest), group, shared=True)
        # (a member's whole tensor is itself: the slice would be a view of every row)
        out.append([t if t.shape[0] == c[i] else t[:c[i]] for t, c in zip(gathered, counts)])
    return out


def _padded(value, rows):
    """value with zero rows appended up to `rows`; value itself when it has that many."""
    if value.shape[0] == rows:
        return value  # (shared: every receiver only reads it)
    padded = torch.zeros((rows,) + tuple(value.shape[1:]), dtype=value.dtype)
    padded[:value.shape[0]] = value
    return padded


def gather_objects(tensors, group):
    """Object path: one all_gather_object of the tuple; [tensor] -> every member's."""
    out = yield Collective("all_gather_object", tuple(tensors), group, shared=True)
    return [[member[i] for member in out] for i in range(len(tensors))]
