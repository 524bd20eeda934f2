#!/usr/bin/python3
"""PyTorch DDP conformance driver for infonce-sim.

An independent implementation, in torch, of the data-parallel InfoNCE step of
SPEC.md (sections 2-4, 7, 8): for every `infonce-case/1` file it

  * runs the step for real: W processes (torch.multiprocessing, spawn), gloo on
    127.0.0.1, DistributedDataParallel around a bias-free nn.Linear(F, D)
    (+ F.normalize), DP groups from dist.new_group (world rank w -> DP shard
    d = w // R, replica r = w % R, DP group {r, r+R, ...}), the gather over the
    DP group (object or tensor path), own slot at the DP rank, compensation,
    gradient accumulation with no_sync;
  * computes the full-batch single-process reference (autograd, float64);
  * compares with the case's `expect`, with `--ref-dir` reference files and,
    with `--infonce-sim PATH`, with `PATH run --case FILE --json`.

Usage: ddp_conformance.py [--infonce-sim PATH] [--rtol 1e-10] CASE_OR_DIR...
Exit: 0 all pass, 1 some failed, 2 bad input, 77 torch not importable (or
every case skipped).

Hard-negative padding: the trainer pads with numpy's generator and the C++
harness with its own; this driver reproduces neither generator. When a case
needs padding it must record `padding_draws` (`infonce-sim export` records them
for generated cases); a case that needs padding without them is skipped with a
message saying so.

Tolerances (SPEC section 6): float64 |got - want| <= 1e-12 + 1e-10 * max|want|.
float32 (key "dtype"): torch and infonce-sim round differently (summation
order), and rounding errors scale with the summands, not with a possibly
cancelled sum, so the scale is condition-aware: 1e-6 + 1e-5 * max(max|want|,
S), with S for gradients infonce-sim's `error_scale` (max over entries of the
sum of |terms| of its reference gradient) and for losses max ||e||^2 / T (the
largest logit). The batched/loop cross-check of the float64 reference uses
1e-14 + 1e-12 * max(max|want|, S). Reported errors are |got - want| divided by
max(scale, atol / rtol): below rtol means within tolerance.
"""

import argparse
import contextlib
import dataclasses
import datetime
import json
import math
import os
import pathlib
import queue
import socket
import subprocess
import sys
import time

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_SKIPPED = 0, 1, 2, 77

try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as torch_mp
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel
except Exception:  # any import failure means "no usable torch here"
    torch = None

NORMALIZE_EPS = 1e-12


class CaseError(Exception):
    """Bad input (the case file, or a step the SPEC defines as an input error)."""


class NeedsPaddingDraws(Exception):
    """The case pads hard negatives but records no padding_draws."""


# --------------------------------------------------------------------------
# Case file (SPEC section 7)
# --------------------------------------------------------------------------


@dataclasses.dataclass
class LossSettings:
    temperature: float
    use_batch: bool
    hard_negatives: object  # None or int >= 1
    padding: str  # "legacy" | "fixed"
    mask_fake_negative: bool
    fake_neg_margin: float
    include_qq: bool
    include_dd: bool


@dataclasses.dataclass
class Case:
    world: int
    dp: int
    reduction: str
    gather: str
    compensate: bool
    loss: LossSettings
    normalize: bool
    weight: list  # D x F
    steps: int
    ga_normalize: bool
    rng_mode: str
    padding_draws: object  # None or [micro][dp rank][draw]
    batches: list  # [micro][dp rank][group][row][F]
    expect: object  # None or dict(loss, grad, rtol?, atol?)
    dtype: str

    @property
    def replicas(self):
        return self.world // self.dp


def _check_keys(obj, where, required, optional=()):
    if not isinstance(obj, dict):
        raise CaseError(f"{where}: expected an object")
    for key in obj:
        if key not in required and key not in optional:
            raise CaseError(f"{where}{key}: unknown key")
    for key in required:
        if key not in obj:
            raise CaseError(f"{where}{key}: missing")


def _bool(value, key):
    if not isinstance(value, bool):
        raise CaseError(f"{key}: expected true or false")
    return value


def _int(value, key, low, high=None):
    if isinstance(value, bool) or not isinstance(value, int):
        raise CaseError(f"{key}: expected an integer")
    if value < low or (high is not None and value > high):
        raise CaseError(f"{key}: {value} out of range")
    return value


def _number(value, key, finite=True):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise CaseError(f"{key}: expected a number")
    if finite and not math.isfinite(value):
        raise CaseError(f"{key}: must be finite")
    return float(value)


def _choice(value, key, choices):
    if value not in choices:
        raise CaseError(f"{key}: expected one of {', '.join(choices)}")
    return value


def _list(value, key, length=None):
    if not isinstance(value, list):
        raise CaseError(f"{key}: expected a list")
    if length is not None and len(value) != length:
        raise CaseError(f"{key}: expected {length} entries, got {len(value)}")
    return value


def _matrix(value, key, cols=None):
    rows = _list(value, key)
    if not rows:
        raise CaseError(f"{key}: empty")
    width = cols if cols is not None else len(_list(rows[0], f"{key}[0]"))
    if width == 0:
        raise CaseError(f"{key}[0]: empty")
    for i, row in enumerate(rows):
        for j, x in enumerate(_list(row, f"{key}[{i}]", width)):
            _number(x, f"{key}[{i}][{j}]")
    return rows


def _parse_loss(obj):
    keys = ("temperature", "use_batch", "hard_negatives", "padding", "mask_fake_negative",
            "fake_neg_margin", "include_qq", "include_dd")
    _check_keys(obj, "loss.", keys)
    temperature = _number(obj["temperature"], "loss.temperature")
    if not temperature > 0:
        raise CaseError(f"loss.temperature: must be > 0, got {temperature}")
    hard = obj["hard_negatives"]
    if hard is not None:
        hard = _int(hard, "loss.hard_negatives", 1)
    return LossSettings(
        temperature=temperature,
        use_batch=_bool(obj["use_batch"], "loss.use_batch"),
        hard_negatives=hard,
        padding=_choice(obj["padding"], "loss.padding", ("legacy", "fixed")),
        mask_fake_negative=_bool(obj["mask_fake_negative"], "loss.mask_fake_negative"),
        fake_neg_margin=_number(obj["fake_neg_margin"], "loss.fake_neg_margin"),
        include_qq=_bool(obj["include_qq"], "loss.include_qq"),
        include_dd=_bool(obj["include_dd"], "loss.include_dd"))


def _parse_batches(value, steps, dp, features):
    micros = _list(value, "batches", steps)
    for m, shards in enumerate(micros):
        for d, groups in enumerate(_list(shards, f"batches[{m}]", dp)):
            for g, rows in enumerate(_list(groups, f"batches[{m}][{d}]")):
                key = f"batches[{m}][{d}][{g}]"
                if len(_list(rows, key)) < 2:
                    raise CaseError(f"{key}: a group needs at least its query and positive rows")
                for i, row in enumerate(rows):
                    for j, x in enumerate(_list(row, f"{key}[{i}]", features)):
                        _number(x, f"{key}[{i}][{j}]")
    return micros


def _parse_draws(value, steps, dp):
    if value is None:
        return None
    micros = _list(value, "padding_draws", steps)
    for m, streams in enumerate(micros):
        for d, draws in enumerate(_list(streams, f"padding_draws[{m}]", dp)):
            for i, j in enumerate(_list(draws, f"padding_draws[{m}][{d}]")):
                _int(j, f"padding_draws[{m}][{d}][{i}]", 0)
    return micros


def _parse_expect(obj, rows, cols):
    if obj is None:
        return None
    _check_keys(obj, "expect.", ("loss", "grad"), ("rtol", "atol"))
    expect = {"loss": _number(obj["loss"], "expect.loss", finite=False)}
    grad = _matrix(obj["grad"], "expect.grad", cols)
    if len(grad) != rows:
        raise CaseError(f"expect.grad: expected {rows} rows, got {len(grad)}")
    expect["grad"] = grad
    for key in ("rtol", "atol"):
        if key in obj:
            expect[key] = _number(obj[key], f"expect.{key}")
    return expect


def parse_case(obj):
    top = ("format", "mesh", "reduction", "gather", "compensate", "loss", "encoder",
           "accumulation", "rng", "batches")
    # "found" (how a property campaign found the case) is metadata: not read here.
    _check_keys(obj, "", top, ("padding_draws", "expect", "dtype", "found"))
    if obj["format"] != "infonce-case/1":
        raise CaseError("format: expected infonce-case/1")
    _check_keys(obj["mesh"], "mesh.", ("world", "dp"))
    world = _int(obj["mesh"]["world"], "mesh.world", 1, 4096)
    dp = _int(obj["mesh"]["dp"], "mesh.dp", 1, world)
    if world % dp:
        raise CaseError(f"mesh.dp: {dp} does not divide mesh.world {world}")
    _check_keys(obj["encoder"], "encoder.", ("normalize", "weight"))
    weight = _matrix(obj["encoder"]["weight"], "encoder.weight")
    _check_keys(obj["accumulation"], "accumulation.", ("steps", "normalize"), ("window",))
    steps = _int(obj["accumulation"]["steps"], "accumulation.steps", 1, 1024)
    # SPEC section 12: only the first `window` micro-steps run; the rest must be empty.
    window = _int(obj["accumulation"].get("window", steps), "accumulation.window", 1, steps)
    batches = _parse_batches(obj["batches"], steps, dp, len(weight[0]))
    draws = _parse_draws(obj.get("padding_draws"), steps, dp)
    for m in range(window, steps):
        if any(batches[m]) or (draws is not None and any(draws[m])):
            raise CaseError(f"batches[{m}]: outside accumulation.window: must be empty")
    _check_keys(obj["rng"], "rng.", ("mode", "seed"))
    _int(obj["rng"]["seed"], "rng.seed", 0)
    return Case(
        world=world,
        dp=dp,
        reduction=_choice(obj["reduction"], "reduction", ("mean", "sum")),
        gather=_choice(obj["gather"], "gather", ("object", "tensor")),
        compensate=_bool(obj["compensate"], "compensate"),
        loss=_parse_loss(obj["loss"]),
        normalize=_bool(obj["encoder"]["normalize"], "encoder.normalize"),
        weight=weight,
        steps=window,
        ga_normalize=_bool(obj["accumulation"]["normalize"], "accumulation.normalize"),
        rng_mode=_choice(obj["rng"]["mode"], "rng.mode", ("synced", "per-rank")),
        padding_draws=None if draws is None else draws[:window],
        batches=batches[:window],
        expect=_parse_expect(obj.get("expect"), len(weight), len(weight[0])),
        dtype=_choice(obj.get("dtype", "float64"), "dtype", ("float64", "float32")))


def load_case(path):
    try:
        with open(path, encoding="utf-8") as f:
            obj = json.load(f)
    except (OSError, ValueError) as e:
        raise CaseError(f"cannot read: {e}") from e
    return parse_case(obj)


# --------------------------------------------------------------------------
# The loss (SPEC section 2), torch
# --------------------------------------------------------------------------


def torch_dtype(case):
    return torch.float64 if case.dtype == "float64" else torch.float32


def shard_inputs(case, micro, shard, dtype):
    """Rows [q, p, n...] of every group laid end to end, and the labels [1, 0 x k] per group."""
    groups = case.batches[micro][shard]
    rows = [row for group in groups for row in group]
    labels = [label for group in groups for label in [1] + [0] * (len(group) - 2)]
    features = len(case.weight[0])
    x = torch.tensor(rows, dtype=dtype).reshape(len(rows), features)
    return x, torch.tensor(labels, dtype=torch.int64)


def encode(x, weight, normalize):
    e = F.linear(x, weight)
    return F.normalize(e, p=2.0, dim=1, eps=NORMALIZE_EPS) if normalize else e


def split_groups(sentences, labels):
    """The trainer's parsing: the i-th 1 in the labels, shifted by i, is group i's query."""
    positives = torch.nonzero(labels == 1).flatten().tolist()
    starts = [p + i for i, p in enumerate(positives)]
    total = labels.numel() + len(positives)
    assert total == sentences.shape[0], "labels do not describe the sentence list"
    assert not starts or starts[0] == 0, "sentences before the first group"
    bounds = starts + [total]
    return [sentences[bounds[i]:bounds[i + 1]] for i in range(len(starts))]


class DrawStream:
    """Recorded padding indices of one (micro-step, stream), consumed in order."""

    def __init__(self, case, micro, stream):
        self.where = f"padding_draws[{micro}][{stream}]"
        self.draws = None if case.padding_draws is None else case.padding_draws[micro][stream]
        self.used = 0

    def take(self, count, negatives):
        if self.draws is None:
            raise NeedsPaddingDraws(
                "hard-negative padding needs recorded padding_draws (this driver does not "
                "reproduce the C++ or numpy generator)")
        if self.used + count > len(self.draws):
            raise CaseError(f"{self.where}: ran out of draws")
        taken = self.draws[self.used:self.used + count]
        self.used += count
        for j in taken:
            if not 0 <= j < negatives:
                raise CaseError(f"{self.where}: index {j} outside [0, {negatives})")
        return taken

    def check_all_used(self):
        if self.draws is not None and self.used != len(self.draws):
            raise CaseError(f"{self.where}: {len(self.draws) - self.used} draws left unused")


def resize_groups(groups, settings, draws):
    """Hard-negative resizing: keep the first H negatives, or pad with drawn rows."""
    hard = settings.hard_negatives
    if hard is None:
        return groups
    # legacy takes row j + 1 of [q, p, n_1..n_k] (may be the positive), fixed row j + 2.
    offset = 1 if settings.padding == "legacy" else 2
    resized = []
    for g, group in enumerate(groups):
        negatives = group.shape[0] - 2
        if negatives < 1:
            raise CaseError(f"group {g}: loss.hard_negatives needs >= 1 negative per group")
        if negatives > hard:
            group = group[:hard + 2]
        elif negatives < hard:
            picked = [j + offset for j in draws.take(hard - negatives, negatives)]
            group = torch.cat([group, group[picked]], dim=0)
        resized.append(group)
    draws.check_all_used()
    return resized


def _check_rows_alive(logits):
    dead = torch.isneginf(logits).all(dim=1)
    if bool(dead.any()):
        g = int(torch.nonzero(dead)[0])
        raise CaseError(f"group {g}: every logit is masked")


def _masked(values, mask):
    return torch.where(mask, torch.full_like(values, -math.inf), values)


def local_loss_batched(groups, t):
    s = torch.stack(groups, dim=0)  # [B, k+2, D]
    logits = torch.matmul(s[:, 0:1], s[:, 1:].transpose(1, 2)).squeeze(1) / t
    target = torch.zeros(s.shape[0], dtype=torch.int64)
    return F.cross_entropy(logits, target)


def local_loss_loop(groups, t):
    total = 0
    for group in groups:
        logits = torch.matmul(group[0], group[1:].T) / t
        total = total - torch.log_softmax(logits, dim=0)[0]
    return total / len(groups)


def global_loss_batched(groups, settings):
    s = torch.stack(groups, dim=0)  # [B, n, D], n = k + 2
    count, block = s.shape[0], s.shape[1] - 1
    queries = s[:, 0]
    docs = s[:, 1:].reshape(-1, s.shape[2])
    targets = torch.arange(count) * block
    own_target = F.one_hot(targets, docs.shape[0]).bool()
    qd = queries @ docs.T
    threshold = qd[torch.arange(count), targets].detach().unsqueeze(1) + settings.fake_neg_margin
    parts = [_masked(qd, qd > threshold) if settings.mask_fake_negative else qd]
    if settings.include_qq:
        qq = _masked(queries @ queries.T, torch.eye(count, dtype=torch.bool))
        parts.append(_masked(qq, qq > threshold) if settings.mask_fake_negative else qq)
    if settings.include_dd:  # never threshold-masked
        parts.append(_masked(s[:, 1] @ docs.T, own_target))
    logits = torch.cat(parts, dim=1)
    _check_rows_alive(logits)
    return F.cross_entropy(logits / settings.temperature, targets)


def global_loss_loop(groups, settings):
    docs = torch.cat([group[1:] for group in groups], dim=0)
    queries = torch.stack([group[0] for group in groups], dim=0)
    total, target = 0, 0
    for g, group in enumerate(groups):
        own_target = torch.arange(docs.shape[0]) == target
        qd = group[0] @ docs.T
        threshold = qd[target].detach() + settings.fake_neg_margin
        parts = [_masked(qd, qd > threshold) if settings.mask_fake_negative else qd]
        if settings.include_qq:
            qq = _masked(group[0] @ queries.T, torch.arange(len(groups)) == g)
            parts.append(_masked(qq, qq > threshold) if settings.mask_fake_negative else qq)
        if settings.include_dd:
            parts.append(_masked(group[1] @ docs.T, own_target))
        row = torch.cat(parts)
        _check_rows_alive(row.unsqueeze(0))
        total = total - torch.log_softmax(row / settings.temperature, dim=0)[target]
        target += group.shape[0] - 1
    return total / len(groups)


def infonce_loss(sentences, labels, settings, draws, path="trainer"):
    """The loss of SPEC section 2 over one list of sentences (a rank's, or a gathered one).

    path: "trainer" picks batched/loop as the trainer does; "loop" forces the loop.
    """
    groups = resize_groups(split_groups(sentences, labels), settings, draws)
    if not groups:
        raise CaseError("the loss's batch has zero groups")
    same_size = len({group.shape[0] for group in groups}) == 1
    batched = path == "trainer" and (settings.hard_negatives is not None or same_size)
    if not settings.use_batch:
        if batched:
            return local_loss_batched(groups, settings.temperature)
        return local_loss_loop(groups, settings.temperature)
    if batched:
        return global_loss_batched(groups, settings)
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


# --------------------------------------------------------------------------
# The data-parallel step (SPEC section 3): what one rank does
# --------------------------------------------------------------------------


def compensation_scale(case):
    """s = P with use_batch, P > 1, mean reduction and compensation on; else 1."""
    if case.loss.use_batch and case.dp > 1 and case.compensate and case.reduction == "mean":
        return case.dp
    return 1


def _gather_objects(value, group, size):
    out = [None] * size
    dist.all_gather_object(out, value, group=group)
    return out


def _gather_tensors(value, group, size):
    """Tensor path: all-gather the shapes first, then the zero-padded tensors."""
    rows = torch.tensor([value.shape[0]], dtype=torch.int64)
    all_rows = [torch.zeros_like(rows) for _ in range(size)]
    dist.all_gather(all_rows, rows, group=group)
    counts = [int(r) for r in all_rows]
    longest = max(max(counts), 1)  # gloo does not gather empty tensors
    padded = torch.zeros((longest,) + tuple(value.shape[1:]), dtype=value.dtype)
    padded[:value.shape[0]] = value
    out = [torch.empty_like(padded) for _ in range(size)]
    dist.all_gather(out, padded, group=group)
    return [t[:n] for t, n in zip(out, counts)]


def gather_over_dp_group(embeddings, labels, case, group, dp_rank):
    """Every DP rank's embeddings and labels in slot order; own live rows in slot dp_rank."""
    gather = _gather_objects if case.gather == "object" else _gather_tensors
    slots = gather(embeddings.detach(), group, case.dp)
    all_labels = gather(labels, group, case.dp)
    slots = [s.detach() for s in slots]
    slots[dp_rank] = embeddings
    return torch.cat(slots, dim=0), torch.cat(all_labels, dim=0)


def _sum_over_dp_group(group, bucket):
    """DDP comm hook for reduction "sum": sum over the rank's DP group, no averaging."""
    work = dist.all_reduce(bucket.buffer(), group=group, async_op=True)
    return work.get_future().then(lambda fut: fut.value()[0])


def dp_groups_for(world, dp, cache):
    """DP group of replica r = {r, r+R, ...}; every rank creates every group, in order."""
    if dp not in cache:
        replicas = world // dp
        cache[dp] = [dist.new_group(ranks=[r + i * replicas for i in range(dp)])
                     for r in range(replicas)]
    return cache[dp]


def rank_step(case, world_rank, group_cache):
    """One data-parallel step on this rank under DDP; returns its report."""
    dtype = torch_dtype(case)
    dp_rank, replica = divmod(world_rank, case.replicas)
    group = dp_groups_for(case.world, case.dp, group_cache)[replica]
    assert dist.get_rank(group) == dp_rank
    rows, features = len(case.weight), len(case.weight[0])
    module = torch.nn.Linear(features, rows, bias=False).to(dtype)
    with torch.no_grad():
        module.weight.copy_(torch.tensor(case.weight, dtype=dtype))
    model = DistributedDataParallel(module)  # default group = world: mean over W ranks
    if case.reduction == "sum":
        model.register_comm_hook(group, _sum_over_dp_group)
    scale = compensation_scale(case)
    divisor = case.steps if case.ga_normalize else 1
    reported = 0.0
    for micro in range(case.steps):
        last = micro == case.steps - 1
        with contextlib.nullcontext() if last else model.no_sync():
            x, labels = shard_inputs(case, micro, dp_rank, dtype)
            embeddings = model(x)
            if case.normalize:
                embeddings = F.normalize(embeddings, p=2.0, dim=1, eps=NORMALIZE_EPS)
            if case.loss.use_batch:
                embeddings, labels = gather_over_dp_group(embeddings, labels, case, group, dp_rank)
            error = None
            try:
                loss = infonce_loss(embeddings, labels, case.loss, DrawStream(case, micro, dp_rank))
            except (CaseError, NeedsPaddingDraws) as e:
                error = str(e)
            # Agree on failure before anyone enters DDP's backward collectives.
            failed = torch.tensor([0 if error is None else 1], dtype=torch.int64)
            dist.all_reduce(failed, op=dist.ReduceOp.MAX)
            if int(failed):
                return {"error": error or "another rank failed"}
            signal = loss if scale == 1 else loss * scale - loss.detach() * (scale - 1)
            (signal / divisor).backward()
            reported += float(loss.detach() / divisor)
    return {"loss": reported, "grad": module.weight.grad.tolist()}


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


# --------------------------------------------------------------------------
# Process pool: W ranks per world size, reused across cases
# --------------------------------------------------------------------------


def _free_loopback_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker_main(world_rank, world, port, tasks, results):
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    torch.set_num_threads(1)
    try:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=world_rank,
                                world_size=world, timeout=datetime.timedelta(seconds=120))
    except Exception as e:  # reported to the parent, which retries on another port
        results.put(("fatal", world_rank, None, repr(e)))
        return
    results.put(("ready", world_rank, None, None))
    group_cache = {}
    while True:
        task = tasks.get()
        if task is None:
            break
        case_id, case = task
        try:
            report = rank_step(case, world_rank, group_cache)
        except Exception as e:  # a bug here: report it; the other ranks may time out
            report = {"error": f"{type(e).__name__}: {e}"}
        results.put(("result", world_rank, case_id, report))
    dist.destroy_process_group()


class PoolError(Exception):
    pass


class RankPool:
    """W spawned processes forming one gloo world; runs one case at a time."""

    def __init__(self, world, timeout):
        self.world = world
        self.timeout = timeout
        context = torch_mp.get_context("spawn")
        self.results = context.Queue()
        self.tasks = [context.Queue() for _ in range(world)]
        port = _free_loopback_port()
        self.procs = [
            context.Process(target=_worker_main, args=(w, world, port, self.tasks[w], self.results),
                            daemon=True) for w in range(world)
        ]
        for p in self.procs:
            p.start()
        ready = self._collect("ready", None)
        failures = [msg for msg in ready.values() if msg is not None]
        if failures:
            self.close()
            raise PoolError(f"world {world}: {failures[0]}")

    def _collect(self, kind, case_id):
        got = {}
        deadline = time.monotonic() + self.timeout
        while len(got) < self.world:
            try:
                tag, rank, cid, payload = self.results.get(timeout=1.0)
            except queue.Empty:
                if time.monotonic() > deadline:
                    raise PoolError(f"world {self.world}: timed out after {self.timeout} s")
                if any(not p.is_alive() for p in self.procs):
                    raise PoolError(f"world {self.world}: a rank process died")
                continue
            if tag == "fatal":
                got[rank] = payload
            elif tag == kind and cid == case_id:
                got[rank] = payload if tag == "result" else None
        return got

    def run(self, case_id, case):
        for q in self.tasks:
            q.put((case_id, case))
        return self._collect("result", case_id)

    def close(self):
        for q, p in zip(self.tasks, self.procs):
            if p.is_alive():
                q.put(None)
        for p in self.procs:
            p.join(timeout=10)
        for p in self.procs:
            if p.is_alive():
                p.terminate()
                p.join(timeout=5)


class Pools:
    def __init__(self, timeout):
        self.timeout = timeout
        self.pools = {}
        self.spawn_seconds = 0.0

    def get(self, world):
        if world not in self.pools:
            start = time.monotonic()
            for attempt in range(3):
                try:
                    self.pools[world] = RankPool(world, self.timeout)
                    break
                except PoolError:
                    if attempt == 2:
                        raise
            self.spawn_seconds += time.monotonic() - start
        return self.pools[world]

    def discard(self, world):
        pool = self.pools.pop(world, None)
        if pool:
            pool.close()

    def close(self):
        for world in list(self.pools):
            self.discard(world)


def run_ddp(pools, case_id, case):
    """Rank 0's reported loss, every rank's loss, the reduced gradient (or an error)."""
    pool = pools.get(case.world)
    try:
        reports = pool.run(case_id, case)
    except PoolError as e:
        pools.discard(case.world)
        return {"error": str(e)}
    errors = [r["error"] for r in reports.values() if "error" in r]
    if errors:
        return {"error": errors[0]}
    grads = [reports[w]["grad"] for w in range(case.world)]
    if any(g != grads[0] for g in grads):
        return {"error": "ranks hold different gradients after the DDP reduction"}
    return {
        "loss": reports[0]["loss"],
        "losses": [reports[w]["loss"] for w in range(case.world)],
        "grad": torch.tensor(grads[0], dtype=torch.float64),
    }


# --------------------------------------------------------------------------
# Comparison
# --------------------------------------------------------------------------


def _none_to_nan(value):
    if isinstance(value, list):
        return [_none_to_nan(v) for v in value]
    return math.nan if value is None else value


def _as_tensor(value):
    if isinstance(value, torch.Tensor):
        return value.detach().to(torch.float64)
    return torch.tensor(_none_to_nan(value), dtype=torch.float64)


def scalar_error(got, want):
    """(relative error, absolute error); non-finite values must match exactly.

    None (JSON null: nlohmann-json writes +-inf and NaN as null) matches any non-finite value.
    """
    if got is None:
        return (0.0, 0.0) if not math.isfinite(want) else (math.inf, math.inf)
    if not (math.isfinite(got) and math.isfinite(want)):
        return (0.0, 0.0) if got == want else (math.inf, math.inf)
    diff = abs(got - want)
    return diff / abs(want) if want else diff, diff


def array_error(got, want):
    """(max|got-want| / max|want|, max|got-want|), SPEC section 6."""
    got, want = _as_tensor(got), _as_tensor(want)
    if got.shape != want.shape or not bool(torch.isfinite(got).all() & torch.isfinite(want).all()):
        same = got.shape == want.shape and bool(torch.equal(got, want))
        return (0.0, 0.0) if same else (math.inf, math.inf)
    diff = float((got - want).abs().max()) if got.numel() else 0.0
    scale = float(want.abs().max()) if want.numel() else 0.0
    return diff / scale if scale else diff, diff


class Verdict:
    """Every comparison of one case; errors are relative to the scale each check used."""

    def __init__(self):
        self.failures = []
        self.loss_error = 0.0
        self.grad_error = 0.0
        self.worst = {}  # (source, "loss" | "grad") -> worst relative error

    @property
    def sources(self):
        return list(dict.fromkeys(source for source, _ in self.worst))

    def check(self, source, what, error, scale, rtol, atol):
        """|got - want| <= atol + rtol * scale.

        The recorded error is |got - want| / max(scale, atol / rtol): below rtol
        means within tolerance, and an exactly-zero quantity computed as
        rounding noise (passing on atol) does not show up as a huge error.
        """
        rel, diff = error
        if math.isfinite(diff):  # comparable with rtol: below it <=> within tolerance (x2)
            floor = max(scale, atol / rtol if rtol > 0 else 0.0)
            rel = diff / floor if floor > 0 else diff
        if what == "grad":
            self.grad_error = max(self.grad_error, rel)
        else:
            self.loss_error = max(self.loss_error, rel)
        self.worst[(source, what)] = max(self.worst.get((source, what), 0.0), rel)
        if not diff <= atol + rtol * scale:
            self.failures.append(f"{source} {what} rel err {rel:.3g}")

    def loss(self, source, got, want, rtol, atol, summand_scale=0.0):
        magnitude = abs(want) if want is not None and math.isfinite(want) else 0.0
        self.check(source, "loss", scalar_error(got, want), max(magnitude, summand_scale), rtol,
                   atol)

    def losses(self, source, got, want, rtol, atol, summand_scale=0.0):
        for g, w in zip(got, want):
            self.loss(source, g, w, rtol, atol, summand_scale)
        if len(got) != len(want):
            self.failures.append(f"{source}: {len(got)} rank losses, expected {len(want)}")

    def grad(self, source, got, want, rtol, atol, summand_scale=0.0):
        want_t = _as_tensor(want)
        magnitude = float(want_t.abs().max()) if want_t.numel() and bool(
            torch.isfinite(want_t).all()) else 0.0
        self.check(source, "grad", array_error(got, want), max(magnitude, summand_scale), rtol,
                   atol)


def start_infonce_sim(binary, path):
    """`binary run --case path --json`, started now (it runs while torch does)."""
    try:
        return subprocess.Popen([binary, "run", "--case", str(path), "--json"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True), None
    except OSError as e:
        return None, f"infonce-sim: {e}"


def finish_infonce_sim(started, timeout):
    """(result JSON, None) or (None, error).

    Exit 1 is `run`'s verdict on its own check (compensate: false differs from
    the reference, legacy padding drew a positive): the result is still the
    step's, and what this driver compares. Any other non-zero exit is an error.
    """
    process, error = started
    if error:
        return None, error
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        return None, f"infonce-sim: timed out after {timeout} s"
    if process.returncode not in (0, 1):
        last = (err.strip().splitlines() or ["(no message)"])[-1]
        return None, f"infonce-sim exited {process.returncode}: {last}"
    try:
        return json.loads(out), None
    except ValueError as e:
        return None, f"infonce-sim exited {process.returncode} and printed no JSON: {e}"


# --------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------


def case_files(arguments):
    files = []
    for arg in arguments:
        path = pathlib.Path(arg)
        if path.is_dir():
            files.extend(sorted(path.glob("*.json")))
        elif path.is_file():
            files.append(path)
        else:
            raise CaseError(f"{arg}: no such file or directory")
    return files


def reference_file(ref_dir, path):
    """ref/NAME.json belongs to NAME-fixed.json (and, compensation-free, NAME-prefix.json)."""
    stem = path.stem
    for suffix in ("-fixed", "-prefix"):
        if stem.endswith(suffix):
            candidate = pathlib.Path(ref_dir) / (stem[:-len(suffix)] + ".json")
            return candidate if candidate.is_file() else None
    return None


def tolerances(args, case, source):
    float32 = case.dtype == "float32"
    rtol = args.rtol if args.rtol is not None else (1e-5 if float32 else 1e-10)
    atol = args.atol if args.atol is not None else (1e-6 if float32 else 1e-12)
    if source == "expect" and case.expect and args.rtol is None:
        rtol = case.expect.get("rtol", rtol)
    if source == "expect" and case.expect and args.atol is None:
        atol = case.expect.get("atol", atol)
    if float32:  # float32 rounding differs between implementations at ~1e-7 (SPEC section 6)
        rtol = rtol if args.rtol is not None else max(rtol, 1e-5)
        atol = atol if args.atol is not None else max(atol, 1e-6)
    return rtol, atol


# Batched and loop paths of the float64 reference: only summation order differs (SPEC 6).
PATH_TOLERANCE = (1e-12, 1e-14)


def summand_scales(case, ref, sim, always=False):
    """(loss scale, grad scale) of the condition-aware float32 comparison, or (0, 0).

    float32 implementations differ in summation order, and a rounding error is
    bounded by the size of the summands, not by their (possibly cancelled or
    tiny) sum. Gradient: infonce-sim's `error_scale` = max(max|G_ref|, max over
    entries of the sum of |terms|) of its reference. Loss: max ||e||^2 / T, the
    largest possible logit (a loss is a mean of log-sum-exp minus a logit).
    float64 keeps the strict bar, relative to max|want| (rtol 1e-10), unless
    `always` (the float64 path cross-check of a degenerate case, e.g. D = 1
    with normalisation, whose exact gradient is 0 and computed one is noise).
    """
    if case.dtype != "float32" and not always:
        return 0.0, 0.0
    out = sim[0] if sim else None
    grad_scale = float(out.get("error_scale") or 0.0) if out else 0.0
    return ref["logit_scale"], grad_scale


def judge(args, path, case, ref, ddp, sim):
    """Every comparison of one case."""
    verdict = Verdict()
    tol = lambda source: tolerances(args, case, source)
    loss_scale, grad_scale = summand_scales(case, ref, sim)
    if ref["loop"] is not None:  # the trainer's two code paths, both float64 here
        _, sim_grad_scale = summand_scales(case, ref, sim, always=True)
        verdict.loss("paths", ref["loop"]["loss"], ref["loss"], *PATH_TOLERANCE,
                     ref["logit_scale"])
        verdict.grad("paths", ref["loop"]["grad"], ref["grad"], *PATH_TOLERANCE, sim_grad_scale)
    if case.expect is not None:
        verdict.loss("expect", ddp["loss"], case.expect["loss"], *tol("expect"))
        verdict.grad("expect", ddp["grad"], case.expect["grad"], *tol("expect"))
    ratio = expected_ratio(case)
    if ratio is not None:  # the DDP step against the own reference
        want = [ref["shard_losses"][w // case.replicas] for w in range(case.world)]
        verdict.losses("self", ddp["losses"], want, *tol("self"), loss_scale)
        verdict.grad("self", ddp["grad"], ref["grad"] * ratio, *tol("self"), grad_scale * ratio)
    if args.ref_dir:
        ref_path = reference_file(args.ref_dir, path)
        if ref_path is not None:
            with open(ref_path, encoding="utf-8") as f:
                stored = json.load(f)
            verdict.loss("ref-dir", ref["loss"], stored["ref_loss"], *tol("ref-dir"))
            verdict.grad("ref-dir", ref["grad"], stored["ref_grad"], *tol("ref-dir"))
    if args.infonce_sim:
        out, error = sim
        if error:
            verdict.failures.append(error)
        else:
            verdict.loss("sim", out.get("loss"), ddp["loss"], *tol("sim"), loss_scale)
            verdict.grad("sim", out.get("grad"), ddp["grad"], *tol("sim"),
                         grad_scale * (ratio if ratio is not None else 1.0))
            if "losses" in out:
                verdict.losses("sim", out["losses"], ddp["losses"], *tol("sim"), loss_scale)
            sim_ref = out.get("reference", {})
            verdict.loss("sim-ref", sim_ref.get("loss"), ref["loss"], *tol("sim"), loss_scale)
            verdict.grad("sim-ref", sim_ref.get("grad"), ref["grad"], *tol("sim"), grad_scale)
    return verdict


def measured_ratio(grad, ref_grad):
    denominator = float((ref_grad * ref_grad).sum())
    return float((grad * ref_grad).sum()) / denominator if denominator else math.nan


def prepare(case):
    """Reference, path cross-check and padding validation in the parent (may raise)."""
    check_padding_streams(case)
    ref = reference(case)
    ref["loop"] = reference(case, path="loop") if batched_path_applies(case) else None
    return ref


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cases", nargs="+", metavar="CASE_OR_DIR")
    parser.add_argument("--infonce-sim", metavar="PATH", help="also compare with PATH run --case")
    parser.add_argument("--rtol", type=float, default=None,
                        help="relative tolerance (default 1e-10; the case's expect.rtol "
                        "for its expect)")
    parser.add_argument("--atol", type=float, default=None, help="absolute tolerance (1e-12)")
    parser.add_argument("--ref-dir", metavar="DIR",
                        help="compare the reference with DIR/NAME.json (ref_loss, ref_grad)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per case")
    parser.add_argument("--json-out", metavar="FILE", help="write one JSON line per case")
    args = parser.parse_args(argv)  # exits 2 on bad usage

    if torch is None:
        print(f"SKIPPED: torch not importable by {sys.executable} (Debian's python3-torch: "
              "INFONCE_WITH_TORCH=1 scripts/setup.sh installs it)")
        return EXIT_SKIPPED
    torch.set_num_threads(1)
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    try:
        files = case_files(args.cases)
    except CaseError as e:
        print(f"error: {e}")
        return EXIT_BAD_INPUT
    if not files:
        print("error: no case files")
        return EXIT_BAD_INPUT

    counts = {"passed": 0, "failed": 0, "skipped": 0, "bad input": 0}
    worst = {}  # (dtype, source, "loss" | "grad") -> worst relative error over all cases
    torch_seconds, torch_cases = 0.0, 0
    pools = Pools(args.timeout)
    json_out = open(args.json_out, "w", encoding="utf-8") if args.json_out else None
    try:
        for case_id, path in enumerate(files):
            name = path.stem
            try:
                case = load_case(path)
                mesh = f"{case.world}/{case.dp}"
                ref = prepare(case)
            except CaseError as e:
                print(f"BAD   {name}: {e}", flush=True)
                counts["bad input"] += 1
                continue
            except NeedsPaddingDraws as e:
                print(f"SKIP  {name} W/P {mesh}: {e}", flush=True)
                counts["skipped"] += 1
                continue
            started = start_infonce_sim(args.infonce_sim, path) if args.infonce_sim else None
            start = time.monotonic()
            ddp = run_ddp(pools, case_id, case)
            torch_seconds += time.monotonic() - start
            torch_cases += 1
            sim = finish_infonce_sim(started, args.timeout) if started else None
            if "error" in ddp:
                print(f"FAIL  {name} W/P {mesh}: torch DDP: {ddp['error']}", flush=True)
                counts["failed"] += 1
                continue
            verdict = judge(args, path, case, ref, ddp, sim)
            ok = not verdict.failures
            counts["passed" if ok else "failed"] += 1
            for (source, what), rel in verdict.worst.items():
                key = (case.dtype, source, what)
                worst[key] = max(worst.get(key, 0.0), rel)
            ratio = measured_ratio(ddp["grad"], ref["grad"])
            print(f"{'PASS' if ok else 'FAIL'}  {name} W/P {mesh}  worst rel err loss "
                  f"{verdict.loss_error:.2e} grad {verdict.grad_error:.2e}  ratio {ratio:.6f}  "
                  f"[vs {','.join(verdict.sources) or 'nothing'}]" +
                  ("" if ok else "  " + "; ".join(verdict.failures)), flush=True)
            if json_out:
                json_out.write(json.dumps({
                    "case": str(path), "pass": ok, "loss": ddp["loss"], "losses": ddp["losses"],
                    "grad": ddp["grad"].tolist(), "ratio": ratio,
                    "reference": {"loss": ref["loss"], "grad": ref["grad"].tolist(),
                                  "shard_losses": ref["shard_losses"]},
                    "failures": verdict.failures}) + "\n")
    finally:
        pools.close()
        if json_out:
            json_out.close()

    print(f"{counts['passed']} passed, {counts['failed']} failed" +
          "".join(f", {counts[k]} {k}" for k in ("skipped", "bad input") if counts[k]))
    for dtype, source in dict.fromkeys((dtype, source) for dtype, source, _ in sorted(worst)):
        scale = " (relative to the summand scale)" if dtype == "float32" and args.infonce_sim \
            and args.rtol is None else ""
        print(f"{dtype} worst rel err vs {source}: loss "
              f"{worst.get((dtype, source, 'loss'), 0.0):.2e}, grad "
              f"{worst.get((dtype, source, 'grad'), 0.0):.2e}{scale}")
    if torch_cases:
        print(f"torch DDP: {torch_cases} cases in {torch_seconds:.2f} s = "
              f"{torch_cases / torch_seconds:.2f} cases/s (including {pools.spawn_seconds:.2f} s "
              f"spawning rank pools)")
    if counts["bad input"]:
        return EXIT_BAD_INPUT
    if counts["failed"]:
        return EXIT_FAILED
    if not counts["passed"]:
        return EXIT_SKIPPED
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
