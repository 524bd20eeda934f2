#!/usr/bin/env python3
"""A misbehaving system under test for the channel's fault tests (no torch).

    fake_sut.py MODE INFONCE_SIM [MARKER_FILE]

It proxies `INFONCE_SIM serve-sut` (the harness's own deterministic step) and
injects one fault. A case is "faulty" when its rng seed is 7 modulo 23:
about one generated case in 23, the same ones on every run, and every shrink
of it keeps its seed (seeds are not shrunk), so a fault that always fires on
faulty cases shrinks like a real bug. MODE:

  crash         faulty case: a traceback on stderr, then exit 3
  hang          the first faulty case of the first process (MARKER_FILE absent): sleep
  junk          faulty case: a line that is not JSON instead of the response
  wrong-shape   faulty case: grad has one row too many
  missing-key   faulty case: no "losses"
  lie           the handshake claims the tensor gather; every tensor case is an error
  early-exit    exit 0 before the handshake
  wrong-version the handshake says infonce-sut/2
  no-handshake  sleep before the handshake
  narrow        no fault; the handshake supports little (world <= 4, no replicas, object
                gather, float64, no hard negatives, no QQ/DD, mean), and a request outside it
                is an error
  pass          no fault
  log           no fault; every request's case is appended to MARKER_FILE (one JSON line each,
                in the order the requests came)

Honest SUTs whose handshake narrows an axis (no fault: `check --sut` must pass; a request
outside the handshake is an error, so the harness must never send one). A "-bug" suffix adds
a real fault: a faulty case's gradient is doubled (a failure that must shrink and reproduce):

  equal-batches  "unequal_batches": false
  synced-only    "rng_modes": ["synced"] (serve-sut's own), per-rank requests are errors
  uniform        "unequal_documents": false, "unequal_shapes": false
  clip-only      "families": ["clip"], "reductions": ["mean"]: a correct CLIP step (serve-sut at
                 autograd/global/scale-1/mean, the point that is correct for the towers and the
                 logit scale alike; the seed's own point is P x on the logit scale)
  rank-local     "reported_loss": "rank-local": each rank reports the loss of its own rows (what
                 serve-sut reports at detached-own-live/local/scale-1, asked a second time);
                 rank-local-bug reports the global loss instead (a wrong rank-local loss)
  decline        declines every faulty case: {"declined": "..."}
"""
import json
import os
import subprocess
import sys
import time


def faulty(case):
    return case.get("rng", {}).get("seed", 0) % 23 == 7


def outside_narrow(case):
    loss = case["loss"]
    return (case["mesh"]["world"] > 4 or case["mesh"]["world"] != case["mesh"]["dp"]
            or case["gather"] != "object" or case["reduction"] != "mean" or "dtype" in case
            or loss["hard_negatives"] is not None or loss["include_qq"] or loss["include_dd"]
            or "padding_draws" in case)


def micro_shards(case):
    """[micro][dp rank] -> the shard's row count, and the shard's documents per query."""
    if case.get("family") == "clip":
        return [[(len(shard["image"]), [1] * len(shard["image"])) for shard in micro]
                for micro in case["clip"]["batches"]]
    return [[(sum(len(group) for group in shard), [len(group) - 1 for group in shard])
             for shard in micro] for micro in case["batches"]]


def outside_honest(mode, case):
    """Why the request lies outside the narrowed handshake, or None."""
    shards = micro_shards(case)
    if mode == "equal-batches":
        if any(len({len(docs) for _, docs in micro}) > 1 for micro in shards):
            return "unequal batches: this trainer needs one group count per rank"
    if mode == "uniform":
        if any(len({rows for rows, _ in micro}) > 1 for micro in shards):
            return "unequal shapes: this trainer gathers one tensor shape"
        if len({d for micro in shards for _, docs in micro for d in docs}) > 1:
            return "unequal documents per query"
    if mode == "synced-only" and case.get("rng", {}).get("mode", "synced") != "synced":
        return "rng.mode per-rank: not supported"
    if mode == "clip-only" and case.get("family") != "clip":
        return "an InfoNCE case: this trainer runs CLIP only"
    return None


HONEST = ("equal-batches", "synced-only", "uniform", "clip-only", "rank-local", "decline")


def honest_handshake(mode, supports):
    if mode == "equal-batches":
        supports["unequal_batches"] = False
    if mode == "uniform":
        supports["unequal_documents"] = False
        supports["unequal_shapes"] = False
    if mode == "clip-only":
        supports["families"] = ["clip"]
        supports["extension_keys"] = [key for key in supports["extension_keys"]
                                      if key != "strategy"] + ["family"]
        supports["reductions"] = ["mean"]
        supports["compensate_false"] = False
    if mode == "rank-local":
        supports["reported_loss"] = "rank-local"


def rank_local_losses(inner, request):
    """Every rank's loss over its own rows: serve-sut's at a local point (same draws)."""
    case = dict(request["case"], compensate=True)
    case["strategy"] = {"gather": "detached-own-live", "scope": "local", "scale": "none",
                        "reduction": case["reduction"]}
    inner.stdin.write(json.dumps({"id": request["id"], "case": case}) + "\n")
    inner.stdin.flush()
    return json.loads(inner.stdout.readline())["losses"]


def double_gradient(response):
    response["grad"] = [[2 * x for x in row] for row in response["grad"]]
    response.pop("grads", None)


def main():
    mode, infonce_sim = sys.argv[1], sys.argv[2]
    marker = sys.argv[3] if len(sys.argv) > 3 else None
    if mode == "early-exit":
        sys.stderr.write("fake SUT: giving up before the handshake\n")
        return 0
    if mode == "no-handshake":
        time.sleep(3600)
    inner = subprocess.Popen([infonce_sim, "serve-sut"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    handshake = json.loads(inner.stdout.readline())
    handshake["name"] = "fake SUT (" + mode + ")"
    if mode == "wrong-version":
        handshake["protocol"] = "infonce-sut/2"
    base_mode = mode[:-len("-bug")] if mode.endswith("-bug") else mode
    if base_mode in HONEST:
        honest_handshake(base_mode, handshake["supports"])
    if mode == "narrow":
        handshake["supports"] = {"use_batch": [True, False], "max_world": 4, "max_replicas": 1,
                                 "mask_fake_negative": True, "compensate_false": True,
                                 "accumulation_normalize": [True, False]}
    print(json.dumps(handshake), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        case = request["case"]
        if mode == "log":
            with open(marker, "a") as log:
                log.write(json.dumps(case, sort_keys=True) + "\n")
        if base_mode in HONEST:
            why = outside_honest(base_mode, case)
            if why:
                print(json.dumps({"id": request["id"], "error": why}), flush=True)
                continue
            if base_mode == "decline" and faulty(case):
                print(json.dumps({"id": request["id"], "declined": "a faulty seed"}), flush=True)
                continue
        if mode == "narrow" and outside_narrow(case):
            print(json.dumps({"id": request["id"],
                              "error": "outside the handshake: " + json.dumps(case["mesh"])}),
                  flush=True)
            continue
        if mode == "lie" and case["gather"] == "tensor":
            print(json.dumps({"id": request["id"],
                              "error": "gather tensor: not implemented in this adapter"}), flush=True)
            continue
        if faulty(case):
            if mode == "crash":
                sys.stderr.write("Traceback (most recent call last):\n"
                                 '  File "fake_sut.py", line 1, in <module>\n'
                                 "RuntimeError: simulated crash in the loss\n")
                sys.stderr.flush()
                os._exit(3)
            if mode == "hang" and marker and not os.path.exists(marker):
                open(marker, "w").close()
                sys.stderr.write("fake SUT: hanging\n")
                sys.stderr.flush()
                time.sleep(3600)
            if mode == "junk":
                print("Epoch 1: loss=0.25 (a stray print on stdout)", flush=True)
                continue
        if base_mode == "clip-only":
            case["strategy"] = {"gather": "autograd", "scope": "global", "scale": "none",
                                "reduction": "mean"}
            line = json.dumps(request) + "\n"
        inner.stdin.write(line)
        inner.stdin.flush()
        response = json.loads(inner.stdout.readline())
        if faulty(case) and mode == "wrong-shape":
            response["grad"].append(response["grad"][0])
        if faulty(case) and mode == "missing-key":
            del response["losses"]
        if mode == "rank-local" and "losses" in response:
            response["losses"] = rank_local_losses(inner, request)
        if faulty(case) and mode.endswith("-bug") and base_mode != "rank-local" \
                and "grad" in response:
            double_gradient(response)
        print(json.dumps(response), flush=True)
    inner.stdin.close()
    inner.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
