"""Adapters: what runs a trainer's loss on one rank (see python/README.md).

An adapter spec is a plain dict (it crosses process boundaries under real DDP):
{"kind": "conformance" | "ms-swift" | "open-clip" | "MODULE:FUNCTION", ...options}. `load_adapter`
builds the adapter from it: the built-in ones, or FUNCTION(**options) imported from
MODULE for a user's own.
"""

from ..runtime.adapter_spec import BUILT_IN, load_adapter  # noqa: F401 - this package's API
