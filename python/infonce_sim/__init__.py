"""infonce-sim's torch side: run a trainer's real InfoNCE loss on virtual or real DDP ranks.

- `infonce_sim.worker`: the `infonce-sut/1` worker loop (docs/sut-protocol.md);
- `infonce_sim.runtime.inprocess`: the in-process deterministic multi-rank runtime;
- `infonce_sim.runtime.ddp`: real DistributedDataParallel (gloo), one process per rank;
- `infonce_sim.adapters`: `conformance` (the SPEC in torch) and `ms_swift` (ms-swift's InfonceLoss);
- `check`, `replay`, `replay_corpus`, `classify` (`infonce_sim.api`): the engine from Python;
- `infonce_sim.pytest_plugin`: the `infonce_check` fixture and the `--infonce-*` options.
"""

from .runtime.protocol import PROTOCOL, Declined  # noqa: F401 - the package's API
from .api import (CheckResult, ClassifyResult, CorpusReplayResult, Failure,
                  InfonceSimError, ReplayResult, check, classify, replay, replay_corpus)
