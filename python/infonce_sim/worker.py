"""`python3 -m infonce_sim.worker` and the `infonce-sim-worker` script: the infonce-sut/1
worker (docs/sut-protocol.md), which is infonce_sim.runtime.worker; this module is its
documented entry point."""

import sys

from .runtime.worker import main

if __name__ == "__main__":
    sys.exit(main())
