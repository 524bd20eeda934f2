"""infonce-sim's torch side: run a trainer's real InfoNCE loss on virtual or real DDP ranks.

- `infonce_sim.worker`: the `infonce-sut/1` worker loop (docs/sut-protocol.md);
- `infonce_sim.inprocess`: the in-process deterministic multi-rank runtime;
- `infonce_sim.ddp`: real DistributedDataParallel (gloo), one process per rank;
- `infonce_sim.adapters`: `conformance` (the SPEC in torch) and `ms_swift` (ms-swift's InfonceLoss);
- `check`, `replay`, `replay_corpus`, `classify` (`infonce_sim.api`): the engine from Python;
- `infonce_sim.pytest_plugin`: the `infonce_check` fixture and the `--infonce-*` options.
"""

PROTOCOL = "infonce-sut/1"


class Declined(Exception):
    """A case the trainer does not run, with the reason (`raise Declined("why")`).

    Raised by an adapter's `decline(case)` hook or its `loss`: the worker answers
    {"id": ..., "declined": "why"}, which the harness counts and reports, never as a failure.
    (Under `--runtime ddp` an exception raised in a rank process reaches the worker as that
    rank's error: decline there with the `decline(case)` hook, which runs in the worker.)"""


from .api import (CheckResult, ClassifyResult, CorpusReplayResult, Failure,  # noqa: E402
                  InfonceSimError, ReplayResult, check, classify, replay, replay_corpus)
