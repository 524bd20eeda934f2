"""Adapters: what runs a trainer's loss on one rank (see python/README.md).

An adapter spec is a plain dict (it crosses process boundaries under real DDP):
{"kind": "conformance" | "ms-swift" | "open-clip" | "MODULE:FUNCTION", ...options}. `load_adapter`
builds the adapter from it: the built-in ones, or FUNCTION(**options) imported from
MODULE for a user's own.
"""

import importlib


def load_adapter(spec):
    kind = spec["kind"]
    options = {k: v for k, v in spec.items() if k != "kind"}
    if kind == "conformance":
        from . import conformance
        return conformance.make(**options)
    if kind == "ms-swift":
        from . import ms_swift
        return ms_swift.make(**options)
    if kind == "open-clip":
        from . import open_clip
        return open_clip.make(**options)
    module_name, sep, function = kind.partition(":")
    if not sep or not module_name or not function:
        raise ValueError(f"--adapter {kind}: expected conformance, ms-swift, open-clip or MODULE:FUNCTION")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise ValueError(f"--adapter {kind}: cannot import {module_name}: {e}") from e
    factory = getattr(module, function, None)
    if factory is None:
        raise ValueError(f"--adapter {kind}: {module_name} has no {function}")
    return factory(**options)
