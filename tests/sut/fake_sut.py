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
"""
import json
import os
import subprocess
import sys
import time


def faulty(case):
    return case["rng"]["seed"] % 23 == 7


def outside_narrow(case):
    loss = case["loss"]
    return (case["mesh"]["world"] > 4 or case["mesh"]["world"] != case["mesh"]["dp"]
            or case["gather"] != "object" or case["reduction"] != "mean" or "dtype" in case
            or loss["hard_negatives"] is not None or loss["include_qq"] or loss["include_dd"]
            or "padding_draws" in case)


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
    if mode == "narrow":
        handshake["supports"] = {"use_batch": [True, False], "max_world": 4, "max_replicas": 1,
                                 "mask_fake_negative": True, "compensate_false": True,
                                 "accumulation_normalize": [True, False]}
    print(json.dumps(handshake), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        case = request["case"]
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
        inner.stdin.write(line)
        inner.stdin.flush()
        response = json.loads(inner.stdout.readline())
        if faulty(case) and mode == "wrong-shape":
            response["grad"].append(response["grad"][0])
        if faulty(case) and mode == "missing-key":
            del response["losses"]
        print(json.dumps(response), flush=True)
    inner.stdin.close()
    inner.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
