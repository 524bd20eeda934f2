"""What the worker and an adapter share of the `infonce-sut/1` protocol (docs/sut-protocol.md):
its name, and how an adapter declines a case."""

PROTOCOL = "infonce-sut/1"


class Declined(Exception):
    """A case the trainer does not run, with the reason (`raise Declined("why")`).

    Raised by an adapter's `decline(case)` hook or its `loss`: the worker answers
    {"id": ..., "declined": "why"}, which the harness counts and reports, never as a failure.
    (Under `--runtime ddp` an exception raised in a rank process reaches the worker as that
    rank's error: decline there with the `decline(case)` hook, which runs in the worker.)"""
