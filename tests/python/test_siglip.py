"""The SigLIP family's Python side (SPEC section 15): the case keys, the rank context, and
open_clip's real SigLipLoss (installed open-clip-torch) in every dist_impl, in-process and
(two dist_impls, ~40 s) under real DDP, without the binary.

Expected values are written here: a one-rank case computed by hand (the formulas in the
test), and for several ranks the full-batch objective in a few lines of plain torch autograd
over the whole batch, not the runtime's or the adapter's code.
"""

import copy
import json
import math
import random

import pytest
import torch
import torch.nn.functional as F

from infonce_sim.adapters import load_adapter
from infonce_sim.adapters._loading import package_dir
from infonce_sim.cases.case import CaseError
from infonce_sim.cases.case_families import parse_case
from infonce_sim.runtime.inprocess_runtime import InProcessRuntime
from infonce_sim.cases.siglip_case import SiglipCase
from infonce_sim.runtime.worker import outside_supports

DIST_IMPLS = ("bidir", "shift", "reduce", "gather")


def needs_open_clip():
    if package_dir("open_clip") is None:
        pytest.skip("open_clip is not installed (scripts/python-env.sh)")


def siglip_case(world, pairs, steps=1, bias=0.5, seed=0, image_normalize=True,
                text_normalize=False):
    """A SigLIP case dict: W = P = world, `pairs` pairs per shard (an int, or a list per
    shard), F_image 2, F_text 3, D 3, numbers drawn from `seed`."""
    rng = random.Random(seed)
    counts = pairs if isinstance(pairs, list) else [pairs] * world

    def matrix(rows, cols):
        return [[rng.gauss(0, 1) for _ in range(cols)] for _ in range(rows)]

    return {"format": "infonce-case/1", "family": "siglip", "mesh": {"world": world, "dp": world},
            "reduction": "mean", "gather": "object", "compensate": True,
            "encoder": {"weight": matrix(3, 5)},
            "siglip": {"image_features": 2,
                       "image_normalize": image_normalize, "text_normalize": text_normalize,
                       "log_scale": 0.7, "bias": bias,
                       "batches": [[{"image": matrix(n, 2), "text": matrix(n, 3)}
                                    for n in counts] for _ in range(steps)]},
            "accumulation": {"steps": steps, "normalize": True}}


def full_batch(obj):
    """(loss, encoder gradient, d/d log_scale, d/d bias) of the full-batch objective: each
    micro-step's -(1/N) sum_ij log sigmoid(y_ij logit_ij) over all shards' pairs, averaged
    over the micro-steps."""
    s = obj["siglip"]
    f = s["image_features"]
    weight = torch.tensor(obj["encoder"]["weight"], dtype=torch.float64, requires_grad=True)
    log_scale = torch.tensor(s["log_scale"], dtype=torch.float64, requires_grad=True)
    bias = torch.tensor(s["bias"], dtype=torch.float64, requires_grad=True)
    total = torch.zeros((), dtype=torch.float64)
    for micro in s["batches"]:
        x = torch.tensor([r for shard in micro for r in shard["image"]], dtype=torch.float64)
        y = torch.tensor([r for shard in micro for r in shard["text"]], dtype=torch.float64)
        a, b = x @ weight[:, :f].T, y @ weight[:, f:].T
        a = F.normalize(a, dim=1) if s["image_normalize"] else a
        b = F.normalize(b, dim=1) if s["text_normalize"] else b
        labels = 2 * torch.eye(len(x), dtype=torch.float64) - 1
        logits = log_scale.exp() * a @ b.T + bias
        total = total - F.logsigmoid(labels * logits).sum() / len(x) / len(s["batches"])
    total.backward()
    return total.item(), weight.grad, log_scale.grad.item(), bias.grad.item()


# -- the case keys ------------------------------------------------------------------------------


def test_a_siglip_case_parses_into_its_towers():
    case = parse_case(siglip_case(2, [1, 2], bias=-2.5))
    assert isinstance(case, SiglipCase) and case.family == "siglip"
    assert (case.world, case.dp, case.dim, case.image_features) == (2, 2, 3, 2)
    assert case.image_weight == [row[:2] for row in case.weight]
    assert case.text_weight == [row[2:] for row in case.weight]
    assert case.bias == -2.5 and case.log_scale == 0.7
    assert [len(image) for image, _ in case.batches[0]] == [1, 2]


def test_an_encoder_normalize_key_is_not_siglips():
    obj = siglip_case(1, 1)
    obj["encoder"]["normalize"] = True  # each tower says it in siglip.*_normalize
    with pytest.raises(CaseError, match="encoder.normalize: unknown key"):
        parse_case(obj)


@pytest.mark.parametrize("edit, message", [
    (lambda s: s.update(extra=1), "siglip.extra: unknown key"),
    (lambda s: s.pop("log_scale"), "siglip.log_scale: missing"),
    (lambda s: s.update(image_features=5), "siglip.image_features: 5 out of range"),
    (lambda s: s.update(bias="x"), "siglip.bias: expected a number"),
    (lambda s: s.update(bias=None), "siglip.bias: expected a number"),
    (lambda s: s.update(log_scale=50.5), "siglip.log_scale: must be <= 50"),
    (lambda s: s.update(weight=[[1.0]]), "siglip.weight: unknown key"),
    (lambda s: s["batches"][0][1].update(text=[[0.0, 0.0, 0.0]] * 3),
     "siglip.batches[0][1].text: 3 rows, image has 2"),
    (lambda s: s["batches"][0][0].update(image=[[0.0, 0.0, 0.0]]),
     "siglip.batches[0][0].image[0]: expected 2 entries"),
])
def test_a_bad_siglip_case_is_an_error_naming_the_key(edit, message):
    obj = siglip_case(2, 2)
    edit(obj["siglip"])
    with pytest.raises(CaseError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_case(obj)


# -- one rank, by hand --------------------------------------------------------------------------


class PlainSiglip:
    """The SPEC's per-rank SigLIP loss on one rank, no collectives (a one-rank adapter)."""

    name = "plain SigLIP"
    supports = {"families": ["siglip"], "extension_keys": ["family"]}

    def siglip_loss(self, ctx, image, text):
        labels = 2 * torch.eye(len(image), dtype=image.dtype) - 1
        logits = ctx.log_scale.exp() * image @ text.T + ctx.bias
        return -F.logsigmoid(labels * logits).sum() / len(image)


def hand_case():
    """W = P = 1, D = F_image = F_text = 1, weights w_a = 2 and w_b = 1, no normalisation,
    scale exp(0) = 1, bias -1; images x = (1, 0.5), texts y = (1, -1)."""
    return {"format": "infonce-case/1", "family": "siglip", "mesh": {"world": 1, "dp": 1},
            "reduction": "mean", "gather": "object", "compensate": True,
            "encoder": {"weight": [[2.0, 1.0]]},
            "siglip": {"image_features": 1, "image_normalize": False,
                       "text_normalize": False, "log_scale": 0.0, "bias": -1.0,
                       "batches": [[{"image": [[1.0], [0.5]], "text": [[1.0], [-1.0]]}]]},
            "accumulation": {"steps": 1, "normalize": True}}


def by_hand():
    """a = (2, 1), b = (1, -1): logits a_i b_j - 1 = [[1, -3], [0, -2]]; labels
    [[+1, -1], [-1, +1]]; z = label * logit = [[1, 3], [0, -2]]. Loss: (1/2) sum
    log(1 + e^-z). d loss / d logit_ij = -(1/2) label_ij sigmoid(-z_ij)."""
    sig = lambda u: 1 / (1 + math.exp(-u))  # noqa: E731
    loss = 0.5 * (math.log1p(math.exp(-1)) + math.log1p(math.exp(-3)) + math.log(2)
                  + math.log1p(math.exp(2)))
    g = [[-0.5 * sig(-1), 0.5 * sig(-3)], [0.5 * sig(0), -0.5 * sig(2)]]
    ab = [[2, -2], [1, -1]]  # a_i b_j (scale 1): d logit / d log_scale
    x_b = [[1, -1], [0.5, -0.5]]  # x_i b_j: d logit / d w_a
    a_y = [[2, -2], [1, -1]]  # a_i y_j: d logit / d w_b

    def total(m):
        return sum(g[i][j] * m[i][j] for i in range(2) for j in range(2))
    return loss, [[total(x_b), total(a_y)]], total(ab), sum(map(sum, g))


def test_one_rank_by_hand():
    result = InProcessRuntime().run(PlainSiglip(), parse_case(hand_case()))
    loss, grad, d_log_scale, d_bias = by_hand()
    assert result["losses"] == [pytest.approx(loss, rel=1e-14)]
    assert result["grad"].tolist() == [[pytest.approx(v, rel=1e-14) for v in grad[0]]]
    assert result["direct"] == {"log_scale": pytest.approx(d_log_scale, rel=1e-14),
                                "bias": pytest.approx(d_bias, abs=1e-15)}


@pytest.mark.parametrize("dist_impl", DIST_IMPLS)
def test_open_clip_one_rank_by_hand(dist_impl):
    needs_open_clip()
    adapter = load_adapter({"kind": "open-clip-siglip", "dist_impl": dist_impl})
    result = InProcessRuntime().run(adapter, parse_case(hand_case()))
    loss, grad, d_log_scale, d_bias = by_hand()
    assert result["losses"] == [pytest.approx(loss, rel=1e-14)]
    assert result["grad"].tolist() == [[pytest.approx(v, rel=1e-14) for v in grad[0]]]
    assert result["direct"]["log_scale"] == pytest.approx(d_log_scale, rel=1e-14)


# -- open_clip's SigLipLoss on several ranks ----------------------------------------------------


@pytest.mark.parametrize("dist_impl", DIST_IMPLS)
@pytest.mark.parametrize("world", [2, 3, 4, 5])
def test_open_clip_siglip_is_the_full_batch_gradient(dist_impl, world):
    """Equal batches: DDP's mean of the ranks' gradients is the full batch's, and the mean
    of the ranks' reported (rank-local) losses is its loss; the bias is learnt too."""
    needs_open_clip()
    adapter = load_adapter({"kind": "open-clip-siglip", "dist_impl": dist_impl})
    obj = siglip_case(world, 2, steps=2, seed=world)
    result = InProcessRuntime().run(adapter, parse_case(copy.deepcopy(obj)))
    loss, grad, d_log_scale, d_bias = full_batch(obj)
    assert sum(result["losses"]) / world == pytest.approx(loss, rel=1e-12)
    assert torch.allclose(result["grad"], grad, rtol=1e-12, atol=1e-13)
    assert result["direct"] == {"log_scale": pytest.approx(d_log_scale, rel=1e-12),
                                "bias": pytest.approx(d_bias, rel=1e-12)}
    for g in result["grads"]:
        assert torch.equal(g, result["grad"])


def test_open_clip_siglip_declares_equal_batches_and_one_replica():
    needs_open_clip()
    supports = load_adapter({"kind": "open-clip-siglip"}).supports
    assert supports["families"] == ["siglip"] and "family" in supports["extension_keys"]
    assert supports["reported_loss"] == "rank-local"
    unequal = parse_case(siglip_case(2, [1, 2]))
    assert outside_supports(unequal, supports).startswith("unequal batches")
    assert outside_supports(parse_case(siglip_case(2, 2)), supports) is None


def test_an_unknown_dist_impl_is_an_error():
    needs_open_clip()
    with pytest.raises(ValueError, match="dist_impl=ring: expected one of bidir, shift"):
        load_adapter({"kind": "open-clip-siglip", "dist_impl": "ring"})


def test_same_case_twice_gives_the_same_bits():
    needs_open_clip()
    adapter = load_adapter({"kind": "open-clip-siglip", "dist_impl": "bidir"})
    obj = siglip_case(4, 3, seed=11)
    first = InProcessRuntime().run(adapter, parse_case(copy.deepcopy(obj)))
    second = InProcessRuntime().run(adapter, parse_case(json.loads(json.dumps(obj))))
    assert first["losses"] == second["losses"] and first["direct"] == second["direct"]
    assert torch.equal(first["grad"], second["grad"])


# -- the conformance adapter's SigLIP (strategic.siglip_strategy_loss) -------------------------


@pytest.mark.parametrize("world", [1, 2, 3])
def test_conformance_siglip_is_the_full_batch_gradient(world):
    """Without a strategy it runs SPEC section 15's step (autograd/local/scale-1), a generator
    on the in-process runtime: with equal batches, the full batch's gradient."""
    obj = siglip_case(world, 2, steps=2, seed=20 + world)
    result = InProcessRuntime().run(load_adapter({"kind": "conformance"}),
                                    parse_case(copy.deepcopy(obj)))
    loss, grad, d_log_scale, d_bias = full_batch(obj)
    assert sum(result["losses"]) / world == pytest.approx(loss, rel=1e-12)
    assert torch.allclose(result["grad"], grad, rtol=1e-12, atol=1e-13)
    assert result["direct"] == {"log_scale": pytest.approx(d_log_scale, rel=1e-12),
                                "bias": pytest.approx(d_bias, rel=1e-12)}


def test_conformance_siglip_at_global_points():
    """Unequal batches, P = 2. autograd/global: every rank reports the full-batch loss; each
    rank's rows get the sum over the P ranks' losses, DDP averages: the full batch's gradient
    for the towers and the direct parameters. detached-own-live/global/scale-P: the towers'
    own-slot gradient times P, averaged: the full batch's; the log scale's P copies times P,
    averaged: P x (docs/strategies.md's derivation for CLIP, the same for SigLIP)."""
    obj = siglip_case(2, [1, 3], seed=31)
    loss, grad, d_log_scale, _ = full_batch(obj)
    runtime = InProcessRuntime()
    adapter = load_adapter({"kind": "conformance"})
    obj["strategy"] = {"gather": "autograd", "scope": "global", "scale": "none"}
    result = runtime.run(adapter, parse_case(copy.deepcopy(obj)))
    assert result["losses"] == [pytest.approx(loss, rel=1e-12)] * 2
    assert torch.allclose(result["grad"], grad, rtol=1e-12, atol=1e-13)
    assert result["direct"]["log_scale"] == pytest.approx(d_log_scale, rel=1e-12)
    obj["strategy"] = {"gather": "detached-own-live", "scope": "global", "scale": "P"}
    result = runtime.run(adapter, parse_case(copy.deepcopy(obj)))
    assert torch.allclose(result["grad"], grad, rtol=1e-12, atol=1e-13)
    assert result["direct"]["log_scale"] == pytest.approx(2 * d_log_scale, rel=1e-12)


# -- the wrong stand-ins of test_field_siglip.py, measured here without the binary -------------


def test_the_wrong_standins_are_wrong_in_the_way_they_say():
    from siglip_standins import DetachedTexts, GlobalDivisor
    obj = siglip_case(2, 2, seed=3)
    _, grad, d_log_scale, _ = full_batch(obj)
    runtime = InProcessRuntime()
    halved = runtime.run(GlobalDivisor(), parse_case(copy.deepcopy(obj)))
    assert torch.allclose(halved["grad"], grad / 2, rtol=1e-12, atol=1e-13)
    assert halved["direct"]["log_scale"] == pytest.approx(d_log_scale / 2, rel=1e-12)
    detached = runtime.run(DetachedTexts(), parse_case(copy.deepcopy(obj)))
    f = obj["siglip"]["image_features"]
    assert torch.allclose(detached["grad"][:, :f], grad[:, :f], rtol=1e-12, atol=1e-13)
    assert not torch.allclose(detached["grad"][:, f:], grad[:, f:], rtol=1e-3)
    assert detached["direct"]["log_scale"] == pytest.approx(d_log_scale, rel=1e-12)


# -- real DDP (gloo) ---------------------------------------------------------------------------


@pytest.mark.parametrize("dist_impl", ["bidir", "reduce"])
def test_open_clip_siglip_under_real_ddp_equals_in_process(dist_impl):
    """The same case (W = 3, two micro-steps) under real DDP: the ring's point-to-point
    messages (bidir) or torch.distributed.nn.all_reduce (reduce) on gloo, DDP's own mean."""
    needs_open_clip()
    from infonce_sim.runtime.ddp import DdpRuntime
    spec = {"kind": "open-clip-siglip", "dist_impl": dist_impl, "max_world": 8}
    adapter = load_adapter(spec)
    case = parse_case(siglip_case(3, 2, steps=2, seed=41))
    ddp = DdpRuntime(spec, timeout=300, max_pools=1)
    try:
        real = ddp.run(adapter, case)
    finally:
        ddp.close()
    inprocess = InProcessRuntime().run(adapter, case)
    assert real["losses"] == pytest.approx(inprocess["losses"], rel=1e-13)
    assert torch.allclose(real["grad"], inprocess["grad"], rtol=1e-12, atol=1e-14)
    assert real["direct"] == pytest.approx(inprocess["direct"], rel=1e-12)
