"""Import-by-path helpers for the built-in adapters: the INSTALLED package's own files, run
without running a package `__init__` that imports what is not installed.

Why: open-clip-torch and lightly are installed without their declared dependencies
(python/requirements/field-nodeps.txt): `import open_clip` and `import lightly` run the
packages' `__init__`, which import torchvision, and PyPI's torchvision cannot be paired
with the CPU torch here. Their loss files themselves need only torch. Nothing here copies
or edits a file: every module is the installed file, executed as it is.

- `package_dir(name)`: the directory of an installed top-level package, found with
  `importlib.util.find_spec(name)` (for a top-level name that runs no code of the package);
- `source_file(relative, root, file, hint)`: the path of the file under test: the user's
  file, or `relative` under the user's root, in this interpreter's install of the package,
  or in a layered venv's (`layered_sites`);
- `layered_sites(relative)`: site-packages directories outside this interpreter that hold
  the package TOP of `relative` ("top/..."): $INFONCE_<TOP>_SITES (os.pathsep-separated),
  else the checkout's `.venv-<top>` (a venv layered on the main one, e.g. .venv-swift);
- `installs(distribution, relative)`: where the field table finds the package's file
  installed (here, or per layered site with its version);
- `shared_third_party(name)`: the shared copy of a project's files (tests' material);
- `load_file(path, module_name, standins)`: execute one file as a module of that name
  (registered in sys.modules while it runs, as an import would), with stand-in modules for
  its imports present while it loads (a missing parent package is a bare one);
- `bare_packages(name, directory, standins)`: a context in which `import name.a.b` executes
  the real file `directory/a/b.py`, while every package on the way (`name`, `name.a`) is a
  bare package object whose `__path__` is its installed directory and whose `__init__.py`
  is NOT executed. `standins` (module name -> attributes) are modules put in sys.modules for
  the duration of the context only, for an import that the loaded files name but never use
  on the path under test (see adapters/lightly.py); they are removed afterwards, so no
  other import in the process ever sees them. The modules loaded stay in sys.modules.
"""

import contextlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.metadata
import importlib.util
import os
import pathlib
import sys
import types
from collections.abc import Mapping

import torch

CHECKOUT = pathlib.Path(__file__).resolve().parents[3]  # python/infonce_sim/adapters/..


def package_dir(name):
    """The installed package's directory, or None (its __init__ is not executed)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return pathlib.Path(list(spec.submodule_search_locations)[0])


def source_file(relative: str, root: str | None = None, file: str | None = None,
                hint: str = "") -> pathlib.Path:
    """The file under test: `file` as given; else `root`/`relative` (ValueError naming the
    root when it lacks the file); else `relative` (e.g. "swift/loss/embedding.py") in the
    directory that holds this interpreter's install of its first part (find_spec: no
    __init__ run), else in the first of its layered_sites(). ValueError (with `hint`) when
    none is given or installed."""
    if root and file:
        raise ValueError(f"give a root or a file for {relative}, not both")
    if file:
        return pathlib.Path(file)
    if root:
        if not (pathlib.Path(root) / relative).is_file():
            raise ValueError(f"{root}: no file {pathlib.Path(root) / relative}")
        return pathlib.Path(root) / relative
    installed = package_dir(_top(relative))
    sites = [] if installed else layered_sites(relative)
    if installed is None and not sites:
        raise ValueError(f"{relative}: no installed package found: {hint}")
    return (installed.parent if installed else pathlib.Path(sites[0])) / relative


def _top(relative: str) -> str:
    return pathlib.PurePath(relative).parts[0]


def layered_sites(relative: str) -> list[str]:
    """site-packages directories outside this interpreter holding the package TOP of
    `relative`: $INFONCE_<TOP>_SITES (os.pathsep-separated, as given), else those of the
    checkout's .venv-<top> that hold `relative` (a venv layered on the main one)."""
    top = _top(relative)
    given = [s for s in os.environ.get(f"INFONCE_{top.upper()}_SITES", "").split(os.pathsep) if s]
    return given or [str(p) for p in sorted(CHECKOUT.glob(f".venv-{top}/lib/python*/site-packages"))
                     if (p / relative).is_file()]


def installs(distribution: str, relative: str) -> list[tuple[str | None, str | None, str | None]]:
    """Where the field table finds `relative` ("top/...") installed: [(None, None, None)] when
    this interpreter has the package TOP; else (site, version, its venv's name) per site of
    layered_sites() holding both the file and `distribution`'s metadata."""
    if package_dir(_top(relative)) is not None:
        return [(None, None, None)]
    found = []
    for site in layered_sites(relative):
        versions = [d.version for d in importlib.metadata.distributions(path=[site])
                    if d.name.replace("_", "-").lower() == distribution]
        if versions and (pathlib.Path(site) / relative).is_file():
            found.append((site, versions[0], pathlib.Path(site).parents[2].name))
    return found


def shared_third_party(name: str) -> pathlib.Path:
    """The shared copy of project `name`'s files: $INFONCE_THIRD_PARTY/name, else
    ../shared/third_party/name beside the checkout."""
    return pathlib.Path(os.environ.get("INFONCE_THIRD_PARTY")
                        or CHECKOUT.parent / "shared" / "third_party") / name


def load_file(path, module_name, standins: Mapping[str, Mapping] | None = None):
    """Execute the file at `path` as module `module_name` (the file as it is), the
    `standins` (module name -> attributes) in sys.modules while it loads. Files written for
    torch >= 2.1 may decorate with torch.compiler.disable at import: where torch lacks
    torch.compiler, an identity decorator (its eager semantics) stands in."""
    path = pathlib.Path(path)
    if not path.is_file():
        raise ValueError(f"no file {path}")
    if not hasattr(torch, "compiler"):
        torch.compiler = types.SimpleNamespace(
            disable=lambda fn=None, **_: fn if fn is not None else (lambda f: f))
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        with _standin_modules(standins or {}):
            spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    return module


@contextlib.contextmanager
def _standin_modules(standins):
    """Modules with the given attributes in sys.modules for the context only (what was there
    before is put back). A name with a dot whose parent is not given gets a bare parent; a
    parent of another stand-in, or a top-level name, is a package (__path__ [] unless
    given)."""
    names = dict(standins)
    for key in list(names):
        parts = key.split(".")
        for i in range(1, len(parts)):
            names.setdefault(".".join(parts[:i]), {})
    saved = {key: sys.modules.get(key) for key in names}
    for key, attributes in names.items():
        module = types.ModuleType(key)
        module.__dict__.update(attributes)
        if "." not in key or any(k.startswith(key + ".") for k in names):
            module.__dict__.setdefault("__path__", [])
        sys.modules[key] = module
    try:
        yield
    finally:
        for key, module in saved.items():
            if module is None:
                sys.modules.pop(key, None)
            else:
                sys.modules[key] = module


class _BareLoader(importlib.abc.Loader):
    def create_module(self, spec):
        return None  # the default module object

    def exec_module(self, module):
        pass  # the package's __init__.py is not run


class _BarePackageFinder(importlib.abc.MetaPathFinder):
    """Packages under `name` as bare directories; plain modules are left to the path finder
    (it looks in the bare parent's __path__: the installed directory)."""

    def __init__(self, name, directory):
        self.name, self.directory = name, pathlib.Path(directory)

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.name and not fullname.startswith(self.name + "."):
            return None
        folder = self.directory.joinpath(*fullname.split(".")[1:])
        if not (folder / "__init__.py").is_file():
            return None
        spec = importlib.machinery.ModuleSpec(fullname, _BareLoader(), is_package=True)
        spec.submodule_search_locations = [str(folder)]
        return spec


@contextlib.contextmanager
def bare_packages(name, directory, standins=None):
    """See the module doc. Yields importlib.import_module."""
    finder = _BarePackageFinder(name, directory)
    with _standin_modules(standins or {}):
        sys.meta_path.insert(0, finder)
        try:
            yield importlib.import_module
        finally:
            sys.meta_path.remove(finder)
