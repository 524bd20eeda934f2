"""The infonce_sim package's imports point one way: case parsing <- runtime <- adapters <- the
front (api, pytest plugin, field, the worker's entry point). Every import counts, a
function-local one as well: a module of a lower layer never imports an upper one, and no
modules import each other in a circle. (Loading an adapter by its name, adapter_spec's
importlib call, is the plugin seam: a name, not an import.) No torch needed: the files are
read with `ast`, not imported.
"""

import ast
import pathlib

from conftest import ROOT

PACKAGE = ROOT / "python" / "infonce_sim"

# The layers, lowest first: each module of the package (its dotted name under infonce_sim;
# "" is the package's __init__) in exactly one, a layer's modules in its subpackage but the
# front's (the package's own modules: its API and entry points). A module may import its own
# layer's and the lower layers' modules only.
LAYERS = (
    ("cases", ("cases", "cases.case", "cases.case_families", "cases.clip_case",
               "cases.ntxent_case", "cases.siglip_case", "cases.spec", "cases.strategy")),
    ("runtime", ("runtime", "runtime.adapter_spec", "runtime.backend", "runtime.ddp",
                 "runtime.families", "runtime.gathers", "runtime.inprocess",
                 "runtime.inprocess_runtime", "runtime.protocol", "runtime.rank",
                 "runtime.rank_deaths", "runtime.standin", "runtime.strategic",
                 "runtime.worker")),
    ("adapters", ("adapters", "adapters._kit", "adapters._loading", "adapters._standins",
                  "adapters.conformance", "adapters.lightly_ntxent", "adapters.ms_swift",
                  "adapters.open_clip", "adapters.open_clip_siglip", "adapters.pylate",
                  "adapters.pytorch_metric_learning", "adapters.sentence_transformers")),
    ("front", ("", "api", "field", "lines_of_code", "pytest_plugin", "worker")),
)


def package_modules(package):
    """Dotted name (under the package) -> file, for every .py file of the package."""
    modules = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def _is_package(name, modules):
    return modules[name].name == "__init__.py"


def _resolve(base, names, modules):
    """The package modules an import of `names` from module `base` reaches: the submodule
    each name is, else `base` itself (a name defined there)."""
    if base not in modules:
        return set()
    reached = set()
    for name in names:
        sub = f"{base}.{name}" if base else name
        reached.add(sub if sub in modules else base)
    return reached


def imports_of(name, modules):
    """The package modules that module `name` imports (anywhere in its file)."""
    tree = ast.parse(modules[name].read_text(encoding="utf-8"))
    own_package = name if _is_package(name, modules) else name.rpartition(".")[0]
    reached = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "infonce_sim" and ".".join(parts[1:]) in modules:
                    reached.add(".".join(parts[1:]))
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                parts = (node.module or "").split(".")
                if parts[0] != "infonce_sim":
                    continue
                base = ".".join(parts[1:])
            else:
                anchor = own_package.split(".") if own_package else []
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            reached |= _resolve(base, [alias.name for alias in node.names], modules)
    reached.discard(name)
    return reached


def import_graph(package):
    modules = package_modules(package)
    return {name: imports_of(name, modules) for name in modules}


def layer_of():
    table = {}
    for rank, (layer, names) in enumerate(LAYERS):
        for name in names:
            assert name not in table, f"{name!r} is in two layers"
            table[name] = (rank, layer)
    return table


def find_cycle(graph):
    """One import circle as a list of modules (first == last), or None."""
    state = {}  # module -> "open" while on the path, "done" after

    def visit(node, path):
        state[node] = "open"
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt, path)
                if found:
                    return found
        path.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node, [])
            if found:
                return found
    return None


def upward_imports(graph, table):
    return sorted(f"{name or 'infonce_sim'} ({table[name][1]}) imports {other or 'infonce_sim'} "
                  f"({table[other][1]})"
                  for name, targets in graph.items() for other in targets
                  if table[other][0] > table[name][0])


def test_every_module_has_a_layer():
    table = layer_of()
    modules = package_modules(PACKAGE)
    assert sorted(set(modules) - set(table)) == [], "modules in no layer: add them to LAYERS"
    assert sorted(set(table) - set(modules)) == [], "LAYERS names modules that do not exist"


def test_a_layers_modules_are_its_subpackage():
    for layer, names in LAYERS:
        if layer != "front":
            assert all(name.split(".")[0] == layer for name in names), layer
    assert all("." not in name for name in dict(LAYERS)["front"])


def test_no_module_imports_an_upper_layer():
    assert upward_imports(import_graph(PACKAGE), layer_of()) == []


def test_the_imports_have_no_circle():
    assert find_cycle(import_graph(PACKAGE)) is None


def test_the_checks_see_a_circle_and_an_upward_import():
    """The helpers on a made-up graph: they can fail."""
    graph = {"case": {"rank"}, "rank": {"case"}, "api": set()}
    assert find_cycle(graph) == ["case", "rank", "case"]
    table = {"case": (0, "cases"), "rank": (1, "runtime"), "api": (3, "front")}
    assert upward_imports(graph, table) == ["case (cases) imports rank (runtime)"]


def test_function_local_and_relative_imports_are_read(tmp_path):
    """A function-local `from ..x import y`, `from . import m` and an absolute import count."""
    package = tmp_path / "infonce_sim"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "low.py").write_text("def f():\n    from .sub import mod\n")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "mod.py").write_text("def g():\n    from ..low import f\n")
    (package / "other.py").write_text("import infonce_sim.low\nfrom infonce_sim.sub import mod\n")
    graph = import_graph(package)
    assert graph["low"] == {"sub.mod"}
    assert graph["sub.mod"] == {"low"}
    assert graph["other"] == {"low", "sub.mod"}
    assert find_cycle(graph) == ["low", "sub.mod", "low"]
