"""The data-parallel InfoNCE loss of SPEC sections 2-4, in torch: one independent reading.

This is the only torch implementation of the SPEC in the repository: the `conformance`
adapter runs it on the in-process runtime and under real DDP, and
tests/torch/ddp_conformance.py judges case files with it.
"""

import array
import functools
import itertools
import math

import torch
import torch.nn.functional as F

from .case import CaseError, NeedsPaddingDraws

NORMALIZE_EPS = 1e-12

def torch_dtype(case):
    return torch.float64 if case.dtype == "float64" else torch.float32


_ARRAY_TYPES = {torch.float64: "d", torch.float32: "f", torch.int64: "q"}


def tensor_of(values, dtype):
    """torch.tensor(list(values), dtype=dtype) of numbers, 1-D: each converted as torch.tensor
    converts it (the C cast of the Python float, or of the int as a double), through a typed
    buffer, without torch.tensor's per-element type inference (several times faster on a
    batch's few rows)."""
    buffer = array.array(_ARRAY_TYPES[dtype], values)
    if not buffer:
        return torch.empty(0, dtype=dtype)
    return torch.frombuffer(buffer, dtype=dtype)


def shard_inputs(case, micro, shard, dtype):
    """Rows [q, p, n...] of every group laid end to end, and the labels [1, 0 x k] per group."""
    groups = case.batches[micro][shard]
    rows = [row for group in groups for row in group]
    labels = [label for group in groups for label in [1] + [0] * (len(group) - 2)]
    features = len(case.weight[0])
    x = tensor_of(itertools.chain.from_iterable(rows), dtype).reshape(len(rows), features)
    return x, tensor_of(labels, torch.int64)


def normalized(e, normalize):
    """Rows scaled to unit L2 norm (where `normalize`): F.normalize(e, p=2.0, dim=1,
    eps=NORMALIZE_EPS) without its expand_as. The division broadcasts the same norms and
    autograd sums their gradient back over the row as ExpandBackward would (sum_to): one
    node fewer, the same bits. (The op e.norm(2.0, 1, keepdim=True) calls, without the
    Python of Tensor.norm and torch.norm around it.)"""
    if not normalize:
        return e
    return e / torch.linalg.vector_norm(e, 2.0, 1, True).clamp_min(NORMALIZE_EPS)


def encode(x, weight, normalize):
    return normalized(F.linear(x, weight), normalize)


def group_bounds(sentences, labels):
    """The trainer's parsing: the i-th 1 in the labels, shifted by i, is group i's query.

    Returns the groups' first rows and the end: group i is rows bounds[i]:bounds[i + 1]."""
    values = labels.tolist()
    positives = [i for i, label in enumerate(values) if label == 1]
    starts = [p + i for i, p in enumerate(positives)]
    total = len(values) + len(positives)
    assert total == sentences.shape[0], "labels do not describe the sentence list"
    assert not starts or starts[0] == 0, "sentences before the first group"
    return starts + [total]


def split_groups(sentences, labels):
    bounds = group_bounds(sentences, labels)
    return [sentences[bounds[i]:bounds[i + 1]] for i in range(len(bounds) - 1)]


class DrawStream:
    """Padding indices of one (micro-step, stream), consumed in order.

    With the case's recorded `padding_draws` they are replayed; without them,
    `generator(count, negatives)` draws (the trainer's way: numpy's global
    generator, which the runtime keeps per rank); with neither the case cannot
    run (NeedsPaddingDraws). Every index handed out is kept in `taken`.
    """

    def __init__(self, case, micro, stream, generator=None):
        self.where = f"padding_draws[{micro}][{stream}]"
        self.draws = None if case.padding_draws is None else case.padding_draws[micro][stream]
        self.generator = generator
        self.used = 0
        self.taken = []

    def take(self, count, negatives):
        if self.draws is None:
            if self.generator is None:
                raise NeedsPaddingDraws(
                    "hard-negative padding needs recorded padding_draws (this driver does not "
                    "reproduce the C++ or numpy generator)")
            taken = [int(j) for j in self.generator(count, negatives)]
        else:
            if self.used + count > len(self.draws):
                raise CaseError(f"{self.where}: ran out of draws")
            taken = self.draws[self.used:self.used + count]
            self.used += count
        for j in taken:
            if not 0 <= j < negatives:
                raise CaseError(f"{self.where}: index {j} outside [0, {negatives})")
        self.taken.extend(taken)
        return taken

    def check_all_used(self):
        if self.draws is not None and self.used != len(self.draws):
            raise CaseError(f"{self.where}: {len(self.draws) - self.used} draws left unused")


def numpy_choice(count, negatives):
    """The trainer's draw: np.random.choice(range(negatives), size=count, replace=True)."""
    import numpy as np
    return np.random.choice(list(range(negatives)), size=count, replace=True).tolist()


def resize_plan(sizes, settings, draws):
    """Hard-negative resizing of groups of these sizes, drawing padding as it goes: per
    group None (kept as is), "truncate" (keep the first H negatives), or the rows of the
    group to append (padding with drawn rows)."""
    hard = settings.hard_negatives
    # legacy takes row j + 1 of [q, p, n_1..n_k] (may be the positive), fixed row j + 2.
    offset = 1 if settings.padding == "legacy" else 2
    plan = []
    for g, size in enumerate(sizes):
        negatives = size - 2
        if negatives < 1:
            raise CaseError(f"group {g}: loss.hard_negatives needs >= 1 negative per group")
        if negatives > hard:
            plan.append("truncate")
        elif negatives < hard:
            plan.append([j + offset for j in draws.take(hard - negatives, negatives)])
        else:
            plan.append(None)
    draws.check_all_used()
    return plan


def _resized(groups, plan, hard):
    resized = []
    for group, step in zip(groups, plan):
        if step == "truncate":
            group = group[:hard + 2]
        elif step is not None:
            group = torch.cat([group, group[step]], dim=0)
        resized.append(group)
    return resized


def resize_groups(groups, settings, draws):
    """Hard-negative resizing: keep the first H negatives, or pad with drawn rows."""
    if settings.hard_negatives is None:
        return groups
    plan = resize_plan([group.shape[0] for group in groups], settings, draws)
    return _resized(groups, plan, settings.hard_negatives)


def _check_rows_alive(logits):
    dead = torch.isneginf(logits).all(dim=1)
    if bool(dead.any()):
        g = int(torch.nonzero(dead)[0])
        raise CaseError(f"group {g}: every logit is masked")


def _check_rows_alive_behind(loss, rows):
    """_check_rows_alive of every logits matrix in `rows`, in order, searched only when
    the loss is not finite: a row whose every logit is -inf has a log-softmax of nan, and
    so has a mean over it, so a finite loss has no such row (one op, not four per matrix;
    nothing between the logits and the loss can raise, so the same error is raised)."""
    if not math.isfinite(loss.item()):
        for logits in rows:
            _check_rows_alive(logits)


def _masked(values, mask):
    # (the values of torch.where(mask, -inf, values), and its gradient: 0 where masked)
    return values.masked_fill(mask, -math.inf)


# The batched losses index the stack with narrow/select and multiply with bmm: the views
# and the kernel that s[:, 1:] (a full slice of dim 0, then dim 1) and matmul (expand,
# reshape, bmm, view) reach, without their no-op steps, each an autograd node that copies.
# The global loss takes the groups' rows laid end to end instead of the stack: its queries
# and positives are strided slices of them (the layout of s.select(1, 0) and
# s.select(1, 1)), its documents one index_select (the contiguous copy that
# s[:, 1:].reshape(-1, D) makes): three nodes, not six.


def local_loss_batched(s, t):
    """s: the groups stacked, [B, k+2, D]."""
    logits = torch.bmm(s.narrow(1, 0, 1), s.narrow(1, 1, s.shape[1] - 1).transpose(1, 2))
    logits = logits.squeeze(1) / t
    return F.cross_entropy(logits, _first_targets(s.shape[0]))


def local_loss_loop(groups, t):
    total = 0
    for group in groups:
        logits = torch.matmul(group[0], group[1:].T) / t
        total = total - torch.log_softmax(logits, dim=0)[0]
    return total / len(groups)


# Constants of a batch's shape, built once and shared (never written: torch reads them as
# indices and masks).


@functools.lru_cache(maxsize=256)
def _first_targets(count):
    """Target 0 (the positive, first after the query) of each of `count` groups."""
    return torch.zeros(count, dtype=torch.int64)


@functools.lru_cache(maxsize=256)
def _document_rows(count, n):
    """The rows after each group's query in `count` groups of n rows (a shared constant)."""
    return torch.arange(count * n).view(count, n)[:, 1:].reshape(-1)


@functools.lru_cache(maxsize=256)
def _global_constants(count, n):
    """For `count` groups of n rows: each query's target among the documents ([count]),
    as a column ([count, 1]: gather's index), the mask of each query's own column of qq
    and of each positive's own column of dd."""
    block = n - 1
    targets = torch.arange(0, count * block, block)
    column = targets.unsqueeze(1)
    own_query = torch.eye(count, dtype=torch.bool)
    own_target = torch.arange(count * block) == column
    return targets, column, own_query, own_target


def global_loss_batched(rows, n, settings):
    """rows: the groups' rows [q, p, n...] laid end to end, [B * n, D], n = k + 2."""
    count = rows.shape[0] // n
    targets, column, own_query, own_target = _global_constants(count, n)
    queries = rows[::n]
    docs = rows.index_select(0, _document_rows(count, n))
    # One transpose for qd and dd: its two gradients sum in it, as they summed in docs (two
    # terms: the same sum in either order).
    docs_t = docs.t()
    qd = torch.mm(queries, docs_t)  # (what matmul of two matrices calls)
    mask = settings.mask_fake_negative
    if mask:  # (gather on the detached qd: no autograd node for a value used as a constant)
        threshold = qd.detach().gather(1, column) + settings.fake_neg_margin
    parts = [_masked(qd, qd > threshold) if mask else qd]
    if settings.include_qq:
        # One masked_fill of both masks: the values and gradient of masking the diagonal,
        # then what is above the threshold (-inf on the diagonal is not above it).
        qq = torch.mm(queries, queries.t())
        parts.append(_masked(qq, own_query | (qq > threshold) if mask else own_query))
    if settings.include_dd:  # never threshold-masked
        parts.append(_masked(torch.mm(rows[1::n], docs_t), own_target))
    # (one part: itself; cat would copy the same values and pass the gradient through)
    logits = torch.cat(parts, dim=1) if len(parts) > 1 else parts[0]
    loss = F.cross_entropy(logits / settings.temperature, targets)
    _check_rows_alive_behind(loss, [logits])
    return loss


def global_loss_loop(groups, settings):
    """Group by group, each row of logits a [1, M] matrix: the query and the positive are
    the rows group[:1] and group[1:2] and each product one mm with the transposes taken
    once, as matmul of the rows (unsqueeze, mm, squeeze) computes it, with fewer nodes. The
    gradient has the same bits: the contributions reach docs_t and queries_t in the order
    they reached docs.T and queries.T of each group (every node of group g runs before any
    of group g - 1), and a query's two products sum in its slice, their sum then added to
    the group's zeros as each alone was (a leading +0 makes signed zeros agree)."""
    docs = torch.cat([group[1:] for group in groups], dim=0)
    docs_t = docs.t()
    if settings.include_qq:
        queries_t = torch.stack([group[0] for group in groups], dim=0).t()
        group_index = torch.arange(len(groups))
    if settings.include_dd:
        doc_index = torch.arange(docs.shape[0])
    total, target = 0, 0
    rows = []
    mask = settings.mask_fake_negative
    for g, group in enumerate(groups):
        query = group[:1]
        qd = torch.mm(query, docs_t)
        if mask:  # (indexing the detached qd: no autograd node for a constant)
            threshold = qd.detach()[0, target] + settings.fake_neg_margin
        parts = [_masked(qd, qd > threshold) if mask else qd]
        if settings.include_qq:  # (one masked_fill of both masks, as global_loss_batched)
            qq = torch.mm(query, queries_t)
            own_query = group_index == g
            parts.append(_masked(qq, own_query | (qq > threshold) if mask else own_query))
        if settings.include_dd:
            own_target = doc_index == target
            parts.append(_masked(torch.mm(group[1:2], docs_t), own_target))
        row = torch.cat(parts, dim=1) if len(parts) > 1 else parts[0]
        rows.append(row)
        total = total - torch.log_softmax(row / settings.temperature, dim=1)[0, target]
        target += group.shape[0] - 1
    loss = total / len(groups)
    _check_rows_alive_behind(loss, rows)
    return loss


def infonce_loss(sentences, labels, settings, draws, path="trainer"):
    """The loss of SPEC section 2 over one list of sentences (a rank's, or a gathered one).

    path: "trainer" picks batched/loop as the trainer does; "loop" forces the loop.

    The batched path stacks the (resized) groups, [B, n, D] (the global loss: their rows
    end to end, [B * n, D]). Where each sentence row
    reaches that stack at most twice (padding picks no row twice), the stack is taken
    from the sentences directly, a view or one index_select, instead of B slices, the
    resizing and a stack: the same values and layout, and the same gradient bits (the
    batched losses slice the stack at least twice, so no element of its gradient is -0;
    a row's gradient is then its one or two contributions plus zeros either way).
    """
    bounds = group_bounds(sentences, labels)
    count = len(bounds) - 1
    sizes = [bounds[i + 1] - bounds[i] for i in range(count)]
    hard = settings.hard_negatives
    trainer = path == "trainer"
    plan = None
    if hard is not None:
        plan = resize_plan(sizes, settings, draws)
    if count and trainer and (len(set(sizes)) == 1 if hard is None else all(
            step is None or step == "truncate" or len(set(step)) == len(step) for step in plan)):
        width = sizes[0] if hard is None else hard + 2
        if hard is None or all(step is None for step in plan):
            rows = sentences
        else:
            picked = []
            for i, step in enumerate(plan):
                start = bounds[i]
                picked.extend(range(start, start + width if step == "truncate" else bounds[i + 1]))
                if step is not None and step != "truncate":
                    picked.extend(start + j for j in step)
            rows = sentences.index_select(0, tensor_of(picked, torch.int64))
        if not settings.use_batch:
            return local_loss_batched(rows.reshape(count, width, rows.shape[1]),
                                      settings.temperature)
        return global_loss_batched(rows, width, settings)
    groups = [sentences[bounds[i]:bounds[i + 1]] for i in range(count)]
    if plan is not None:
        groups = _resized(groups, plan, hard)
    if not groups:
        raise CaseError("the loss's batch has zero groups")
    same_size = len({group.shape[0] for group in groups}) == 1
    batched = trainer and (hard is not None or same_size)
    if not settings.use_batch:
        if batched:
            return local_loss_batched(torch.stack(groups, dim=0), settings.temperature)
        return local_loss_loop(groups, settings.temperature)
    if batched:
        return global_loss_batched(torch.cat(groups, dim=0), groups[0].shape[0], settings)
    return global_loss_loop(groups, settings)


def batched_path_applies(case):
    if case.loss.hard_negatives is not None:
        return True
    for shards in case.batches:
        pools = [g for s in shards for g in s] if case.loss.use_batch else None
        for groups in ([pools] if pools is not None else shards):
            if len({len(g) for g in groups}) == 1:
                return True
    return False


def compensation_scale(case):
    """s = P with use_batch, P > 1, mean reduction and compensation on; else 1."""
    if case.loss.use_batch and case.dp > 1 and case.compensate and case.reduction == "mean":
        return case.dp
    return 1



# --------------------------------------------------------------------------
# The reference (SPEC section 4): one process, exact autograd
# --------------------------------------------------------------------------


def reference(case, path="trainer"):
    """Full-batch reference: loss, gradient, and each DP shard's reported loss."""
    dtype = torch.float64
    weight = torch.tensor(case.weight, dtype=dtype, requires_grad=True)
    divisor = case.steps if case.ga_normalize else 1
    total = 0
    shard_losses = [0.0] * case.dp
    logit_scale = 0.0
    for micro in range(case.steps):
        inputs = [shard_inputs(case, micro, d, dtype) for d in range(case.dp)]
        logit_scale = max(logit_scale, _logit_bound(case, inputs, weight))
        if case.loss.use_batch:
            x = torch.cat([i[0] for i in inputs])
            labels = torch.cat([i[1] for i in inputs])
            try:
                term = infonce_loss(encode(x, weight, case.normalize), labels, case.loss,
                                    DrawStream(case, micro, 0), path)
            except CaseError as e:
                raise CaseError(f"batches[{micro}]: {e}") from e
            shard_losses = [s + float(term.detach()) / divisor for s in shard_losses]
        else:
            per_shard = []
            for d, (x, labels) in enumerate(inputs):
                try:
                    per_shard.append(infonce_loss(encode(x, weight, case.normalize), labels,
                                                  case.loss, DrawStream(case, micro, d), path))
                except CaseError as e:
                    raise CaseError(f"batches[{micro}][{d}]: {e}") from e
                shard_losses[d] += float(per_shard[-1].detach()) / divisor
            term = sum(per_shard)
            if case.reduction == "mean":
                term = term / case.dp
        total = total + term / divisor
    (grad,) = torch.autograd.grad(total, weight)
    return {"loss": float(total.detach()), "grad": grad, "shard_losses": shard_losses,
            "logit_scale": logit_scale}


def _logit_bound(case, inputs, weight):
    """max ||e||^2 / T over one micro-step's embeddings: no logit is larger in magnitude.

    A loss value is a mean of log-sum-exps of logits minus a logit, so the
    rounding error of any implementation is relative to this scale, not to the
    (possibly tiny) loss itself.
    """
    with torch.no_grad():
        e = encode(torch.cat([i[0] for i in inputs]), weight.detach(), case.normalize)
        if e.numel() == 0:
            return 0.0
        return float((e * e).sum(dim=1).max()) / case.loss.temperature


def check_padding_streams(case):
    """Every rank's padding stream is consumable (validated here, before any rank runs)."""
    if case.loss.hard_negatives is None:
        return
    for micro, shards in enumerate(case.batches):
        for stream in range(case.dp):
            groups = [g for s in shards for g in s] if case.loss.use_batch else shards[stream]
            draws = DrawStream(case, micro, stream)
            for group in groups:
                negatives = len(group) - 2
                if 1 <= negatives < case.loss.hard_negatives:
                    draws.take(case.loss.hard_negatives - negatives, negatives)
            draws.check_all_used()


def expected_ratio(case):
    """<DDP grad, ref> / <ref, ref> when the step is a single objective, else None."""
    padded = case.loss.hard_negatives is not None and case.padding_draws is not None and any(
        draws for streams in case.padding_draws for draws in streams)
    if case.loss.use_batch and case.rng_mode == "per-rank" and padded:
        return None  # each rank pads differently: no single objective (SPEC section 3)
    if case.loss.use_batch and case.reduction == "mean":
        return compensation_scale(case) / case.dp
    return 1.0

