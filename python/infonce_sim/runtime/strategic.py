"""The conformance adapter's reading of issue 13's keys (docs/MODEL.md 3.7,
docs/strategies.md): the InfoNCE loss at any strategy point and with a learnable
inverse temperature, and the CLIP and SigLIP losses at any strategy point. Generators,
like the conformance adapter: they yield their collectives.

The gather runs over the strategy's group (strategy.gather_group): the DP group, or the
default (world) group, every shard R times, the own slot at the world rank.

InfoNCE, where there is a gather (use_batch, more than one member in that group):
  * gather `detached-own-live`: the detached gather (the case's object or tensor path)
    with the rank's own live rows in its slot (spec.py's step); `detached`: no slot
    live; `autograd`: ctx.autograd_gather, every slot live, its gradient summed over the
    ranks and returned to the owner (unequal shards are padded to the longest first);
  * scope `global`: spec.py's loss over the gathered batch (the trainer's batched/loop
    choice); `local`: the rank's own groups (those whose query lies in its slot) as the
    only logit rows, each against every gathered document (and query, include_qq), the
    targets where the global loss has them, hard-negative padding over the gathered batch
    as the global loss pads it, always the per-group loop, the mean over the own groups
    (no own group: loss 0, gradient 0), as loss/infonce_local.cpp. Under `detached` the
    own queries come from the live local tensor (their logit-row role only; their roles
    as columns, and the positive of the dd block, are the gathered constants);
  * scale s (1, P or W): backpropagate s * L, report L (spec.py's compensation form).
Without a gather the loss is the rank's own (spec.py), scaled by s.

The learnable temperature: logits = tau * similarity (tau = ctx.inverse_temperature);
the fake-negative mask compares raw similarities (spec.py already does), no gradient
through the threshold.
"""

import math

import torch
import torch.nn.functional as F

from ..cases.case import CaseError
from ..cases.spec import infonce_loss, resize_groups, split_groups
from ..cases.strategy import effective_strategy, gather_group, has_gather
from .gathers import gather_objects, gather_tensors
from .rank import Collective


def scaled(loss, scale):
    """(backpropagated, reported): s * L with L's own value reported, as the conformance
    adapter compensates."""
    if scale == 1:
        return loss
    return loss * scale, loss


def _masked(values, mask):
    return torch.where(mask, torch.full_like(values, -math.inf), values)


def _check_rows_alive(logits):
    dead = torch.isneginf(logits).all(dim=1)
    if bool(dead.any()):
        g = int(torch.nonzero(dead)[0])
        raise CaseError(f"group {g}: every logit is masked")


def _temper(logits, settings, tau):
    return logits / settings.temperature if tau is None else logits * tau


# -- the gathers ---------------------------------------------------------------------------


def detached_gather(ctx, tensors):
    """The case's gather path (object or tensor) of each tensor, every slot a constant:
    [tensor] -> every member's, in slot order."""
    gather = gather_objects if ctx.case.gather == "object" else gather_tensors
    gathered = yield from gather(tuple(t.detach() for t in tensors), gather_group(ctx)[0])
    return [[s.detach() for s in slots] for slots in gathered]


def autograd_gather_rows(ctx, rows):
    """Every member's rows, differentiable: row counts first, then ctx.autograd_gather of
    the rows padded to the longest (at least one row: gloo gathers no empty tensor)."""
    group = gather_group(ctx)[0]
    counts = yield Collective("all_gather", torch.tensor([rows.shape[0]], dtype=torch.int64),
                              group)
    counts = [int(c) for c in counts]
    longest = max(max(counts), 1)
    padded = rows
    if rows.shape[0] < longest:
        padded = torch.cat([rows, rows.new_zeros((longest - rows.shape[0],) + rows.shape[1:])])
    slots = yield from ctx.autograd_gather(padded, group)
    return [s[:n] for s, n in zip(slots, counts)]


def gather_rows(ctx, tensors, gather_kind):
    """The gathered slots of each of `tensors` (the rank's live rows) for the strategy's
    gather: [tensor] -> every member's rows, in slot order."""
    if gather_kind == "autograd":
        out = []
        for rows in tensors:
            out.append((yield from autograd_gather_rows(ctx, rows)))
        return out
    out = yield from detached_gather(ctx, tensors)
    if gather_kind == "detached-own-live":
        own = gather_group(ctx)[1]
        for slots, rows in zip(out, tensors):
            slots[own] = rows
    return out


# -- InfoNCE with tau ------------------------------------------------------------------------


def _no_batch_loss(groups, settings, tau, batched):
    if batched:
        s = torch.stack(groups, dim=0)
        logits = torch.matmul(s[:, 0:1], s[:, 1:].transpose(1, 2)).squeeze(1)
        target = torch.zeros(s.shape[0], dtype=torch.int64)
        return F.cross_entropy(_temper(logits, settings, tau), target)
    total = 0
    for group in groups:
        logits = torch.matmul(group[0], group[1:].T)
        total = total - torch.log_softmax(_temper(logits, settings, tau), dim=0)[0]
    return total / len(groups)


def _global_batched(groups, settings, tau):
    s = torch.stack(groups, dim=0)
    count, block = s.shape[0], s.shape[1] - 1
    queries = s[:, 0]
    docs = s[:, 1:].reshape(-1, s.shape[2])
    targets = torch.arange(count) * block
    own_target = F.one_hot(targets, docs.shape[0]).bool()
    qd = queries @ docs.T
    threshold = qd[torch.arange(count), targets].detach().unsqueeze(1) + settings.fake_neg_margin
    none = torch.zeros_like(qd, dtype=torch.bool)
    parts = [(qd, qd > threshold if settings.mask_fake_negative else none)]
    if settings.include_qq:
        qq = queries @ queries.T
        own = torch.eye(count, dtype=torch.bool)
        parts.append((qq, own | (qq > threshold) if settings.mask_fake_negative else own))
    if settings.include_dd:
        parts.append((s[:, 1] @ docs.T, own_target))
    logits = _tempered_and_masked(parts, settings, tau, dim=1)
    _check_rows_alive(logits)
    return F.cross_entropy(logits, targets)


def _tempered_and_masked(parts, settings, tau, dim):
    """The (similarities, mask) blocks concatenated, tempered, then masked to -inf.

    Tempering before masking keeps d/dtau finite (tau * -inf would give 0 * inf); the
    values are those of masking first, since a masked entry is -inf either way.
    """
    raw = torch.cat([p for p, _ in parts], dim=dim)
    mask = torch.cat([m for _, m in parts], dim=dim)
    return _masked(_temper(raw, settings, tau), mask)


def _loop_rows(groups, settings, tau, rows, query_of):
    """The per-group loop over the groups in `rows` (indices), each against every group's
    documents (and queries); query_of(g) is group g's query as a logit row's operand."""
    docs = torch.cat([group[1:] for group in groups], dim=0)
    queries = torch.stack([group[0] for group in groups], dim=0)
    starts, at = [], 0
    for group in groups:
        starts.append(at)
        at += group.shape[0] - 1
    total = 0
    for g in rows:
        group, target, query = groups[g], starts[g], query_of(g)
        qd = query @ docs.T
        threshold = qd[target].detach() + settings.fake_neg_margin
        none = torch.zeros_like(qd, dtype=torch.bool)
        parts = [(qd, qd > threshold if settings.mask_fake_negative else none)]
        if settings.include_qq:
            qq = query @ queries.T
            own = torch.arange(len(groups)) == g
            parts.append((qq, own | (qq > threshold) if settings.mask_fake_negative else own))
        if settings.include_dd:
            parts.append((group[1] @ docs.T, torch.arange(docs.shape[0]) == target))
        row = _tempered_and_masked(parts, settings, tau, dim=0)
        _check_rows_alive(row.unsqueeze(0))
        total = total - torch.log_softmax(row, dim=0)[target]
    return total / len(rows)


def infonce_with_tau(sentences, labels, settings, draws, tau):
    """spec.infonce_loss (the trainer's batched/loop choice) with logits tau * similarity;
    tau None: spec.infonce_loss itself, bit for bit."""
    if tau is None:
        return infonce_loss(sentences, labels, settings, draws)
    groups = resize_groups(split_groups(sentences, labels), settings, draws)
    if not groups:
        raise CaseError("the loss's batch has zero groups")
    batched = settings.hard_negatives is not None or len({g.shape[0] for g in groups}) == 1
    if not settings.use_batch:
        return _no_batch_loss(groups, settings, tau, batched)
    if batched:
        return _global_batched(groups, settings, tau)
    return _loop_rows(groups, settings, tau, range(len(groups)), lambda g: groups[g][0])


def infonce_local(sentences, labels, settings, draws, tau, own_offset, own_rows, live):
    """The local loss of a rank whose live rows sit at [own_offset, own_offset + own_rows)
    of the gathered batch; `live`: the local tensor when the own queries must come from it
    (the detached gather), else None (they are the batch's rows)."""
    positives = torch.nonzero(labels == 1).flatten().tolist()
    starts = [p + i for i, p in enumerate(positives)]  # each group's query row
    groups = resize_groups(split_groups(sentences, labels), settings, draws)
    if not groups:
        raise CaseError("the loss's batch has zero groups")
    own = [g for g, row in enumerate(starts) if own_offset <= row < own_offset + own_rows]
    if not own:
        # No own query: loss 0, gradient 0; still a function of the gathered batch, so
        # that an autograd gather's backward (a collective under real DDP) runs on
        # this rank too, as it does on every other member.
        return (sentences * 0).sum()
    if live is None:
        query_of = lambda g: groups[g][0]  # noqa: E731
    else:
        query_of = lambda g: live[starts[g] - own_offset]  # noqa: E731
    return _loop_rows(groups, settings, tau, own, query_of)


def infonce_strategy_loss(ctx, embeddings, labels):
    """One rank's InfoNCE loss at the case's strategy point: (backpropagated, reported)."""
    case = ctx.case
    strategy = effective_strategy(case)
    tau = ctx.inverse_temperature
    draws = ctx.padding_stream()
    if not has_gather(case):
        loss = infonce_with_tau(embeddings, labels, case.loss, draws, tau)
    else:
        if strategy.gather == "autograd":
            (slots,) = yield from gather_rows(ctx, (embeddings,), "autograd")
            (label_slots,) = yield from detached_gather(ctx, (labels,))
        else:  # embeddings and labels in one gather, as the conformance adapter's
            slots, label_slots = yield from detached_gather(ctx, (embeddings, labels))
            if strategy.gather == "detached-own-live":
                slots[gather_group(ctx)[1]] = embeddings
        batch, all_labels = torch.cat(slots, dim=0), torch.cat(label_slots, dim=0)
        if strategy.scope == "global":
            loss = infonce_with_tau(batch, all_labels, case.loss, draws, tau)
        else:
            offset = sum(s.shape[0] for s in slots[:gather_group(ctx)[1]])
            live = embeddings if strategy.gather == "detached" else None
            loss = infonce_local(batch, all_labels, case.loss, draws, tau, offset,
                                 embeddings.shape[0], live)
    return scaled(loss, strategy.factor(ctx.dp, ctx.world))


# -- CLIP --------------------------------------------------------------------------------------


def clip_objective(image_queries, text_queries, image_docs, text_docs, offset, logit_scale,
                   logit_bias):
    """(CE(i2t) + CE(t2i)) / 2, mean over the query rows, targets offset + arange(n)."""
    logits_i2t = logit_scale * image_queries @ text_docs.T
    logits_t2i = logit_scale * text_queries @ image_docs.T
    if logit_bias is not None:
        logits_i2t = logits_i2t + logit_bias
        logits_t2i = logits_t2i + logit_bias
    targets = offset + torch.arange(image_queries.shape[0])
    return (F.cross_entropy(logits_i2t, targets) + F.cross_entropy(logits_t2i, targets)) / 2


def clip_strategy_loss(ctx, image, text, logit_scale, logit_bias):
    """One rank's CLIP loss at the case's strategy point: (backpropagated, reported)."""
    case = ctx.case
    strategy = effective_strategy(case)
    if not has_gather(case):
        loss = clip_objective(image, text, image, text, 0, logit_scale, logit_bias)
    else:
        image_slots, text_slots = yield from gather_rows(ctx, (image, text), strategy.gather)
        all_image, all_text = torch.cat(image_slots, dim=0), torch.cat(text_slots, dim=0)
        if strategy.scope == "global":
            loss = clip_objective(all_image, all_text, all_image, all_text, 0, logit_scale,
                                  logit_bias)
        else:  # the own live rows are the queries
            offset = sum(s.shape[0] for s in image_slots[:gather_group(ctx)[1]])
            loss = clip_objective(image, text, all_image, all_text, offset, logit_scale,
                                  logit_bias)
    return scaled(loss, strategy.factor(ctx.dp, ctx.world))


# -- NT-Xent -----------------------------------------------------------------------------------


def ntxent_objective(queries, query_columns, rows, positives, case, tau):
    """SPEC section 14 over the query rows: row k's logits r_k . r_j / T (or * tau) against
    every row j of `rows` but its own column (query_columns[k], masked to -inf), its target
    the other view's column positives[k]; the mean over the query rows."""
    logits = _temper(queries @ rows.T, case, tau)
    own = F.one_hot(query_columns, rows.shape[0]).bool()
    return F.cross_entropy(_masked(logits, own), positives)


def ntxent_strategy_loss(ctx, first, second):
    """One rank's NT-Xent loss at the case's strategy point: (backpropagated, reported).
    The gathered rows are every slot's first views, then every slot's second views (N of
    each); global: all 2N rows as queries; local: the own live 2n rows, at columns offset + i
    and N + offset + i."""
    case = ctx.case
    strategy = effective_strategy(case)
    tau = ctx.inverse_temperature
    n = first.shape[0]
    if not has_gather(case):
        rows = torch.cat([first, second])
        columns = torch.arange(2 * n)
        return scaled(ntxent_objective(rows, columns, rows, (columns + n) % (2 * n), case, tau),
                      strategy.factor(ctx.dp, ctx.world))
    first_slots, second_slots = yield from gather_rows(ctx, (first, second), strategy.gather)
    rows = torch.cat(first_slots + second_slots)
    total = rows.shape[0] // 2
    if strategy.scope == "global":
        columns = torch.arange(2 * total)
        loss = ntxent_objective(rows, columns, rows, (columns + total) % (2 * total), case, tau)
    else:
        offset = sum(s.shape[0] for s in first_slots[:gather_group(ctx)[1]])
        own = torch.arange(offset, offset + n)
        columns = torch.cat([own, own + total])
        positives = torch.cat([own + total, own])
        loss = ntxent_objective(torch.cat([first, second]), columns, rows, positives, case, tau)
    return scaled(loss, strategy.factor(ctx.dp, ctx.world))

# -- SigLIP ------------------------------------------------------------------------------------


def siglip_objective(image_queries, text_docs, offset, log_scale, bias):
    """SPEC section 15 over the query rows: -(1/n) sum_ij log sigmoid(y_ij logit_ij), logits
    exp(log_scale) a_i . b_j + bias, y_ij = +1 at the query's own text (offset + i), else -1."""
    logits = log_scale.exp() * image_queries @ text_docs.T + bias
    n = image_queries.shape[0]
    labels = -torch.ones_like(logits)
    labels[torch.arange(n), offset + torch.arange(n)] = 1.0
    return -F.logsigmoid(labels * logits).sum() / n


def siglip_strategy_loss(ctx, image, text):
    """One rank's SigLIP loss at the case's strategy point (without one, SPEC section 15's
    step: autograd/local/scale-1): (backpropagated, reported). Global: every gathered image
    against every gathered text; local: the own live images against every gathered text."""
    case = ctx.case
    strategy = effective_strategy(case)
    if not has_gather(case):
        loss = siglip_objective(image, text, 0, ctx.log_scale, ctx.bias)
    else:
        image_slots, text_slots = yield from gather_rows(ctx, (image, text), strategy.gather)
        all_text = torch.cat(text_slots, dim=0)
        if strategy.scope == "global":
            loss = siglip_objective(torch.cat(image_slots, dim=0), all_text, 0, ctx.log_scale,
                                    ctx.bias)
        else:
            offset = sum(s.shape[0] for s in image_slots[:gather_group(ctx)[1]])
            loss = siglip_objective(image, all_text, offset, ctx.log_scale, ctx.bias)
    return scaled(loss, strategy.factor(ctx.dp, ctx.world))
