"""The middle layer: what runs a case's step on ranks and answers the harness: the rank
program (rank, families, gathers, strategic), the in-process runtime (inprocess,
inprocess_runtime, backend, standin), real DDP (ddp), adapter loading by name (adapter_spec)
and the infonce-sut/1 worker (worker, protocol). It imports the cases, never an adapter
(tests/python/test_import_layers.py)."""
