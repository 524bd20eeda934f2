"""An adapter spec (a plain dict: it crosses process boundaries under real DDP) -> the
adapter: {"kind": "conformance" | "ms-swift" | "open-clip" | ... | "MODULE:FUNCTION",
...options}. A built-in kind names a module of the adapters package, imported by name like a
user's MODULE (the runtime loads adapters; it does not depend on any one of them).
"""

import importlib


# The built-in adapters' package (of the top package this one is in: a renamed copy of it,
# as bench/replay_ab.py makes, loads its own adapters)
ADAPTERS = f"{__name__.split('.')[0]}.adapters"

# The built-in adapters: the name --adapter takes -> the module (in ADAPTERS) whose
# make(**options) builds it. One line per adapter.
BUILT_IN = {
    "conformance": "conformance",
    "ms-swift": "ms_swift",
    "open-clip": "open_clip",
    "open-clip-siglip": "open_clip_siglip",
    "lightly": "lightly_ntxent",
    "sentence-transformers": "sentence_transformers",
    "pytorch-metric-learning": "pytorch_metric_learning",
    "pylate": "pylate",
}


def load_adapter(spec):
    kind = spec["kind"]
    options = {k: v for k, v in spec.items() if k != "kind"}
    if kind in BUILT_IN:
        module = importlib.import_module(f"{ADAPTERS}.{BUILT_IN[kind]}")
        return module.make(**options)
    module_name, sep, function = kind.partition(":")
    if not sep or not module_name or not function:
        names = ", ".join(BUILT_IN)
        raise ValueError(f"--adapter {kind}: expected one of {names}, or MODULE:FUNCTION")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise ValueError(f"--adapter {kind}: cannot import {module_name}: {e}") from e
    factory = getattr(module, function, None)
    if factory is None:
        raise ValueError(f"--adapter {kind}: {module_name} has no {function}")
    return factory(**options)
