"""Import-by-path helpers for the built-in adapters: the INSTALLED package's own files, run
without running a package `__init__` that imports what is not installed.

Why: open-clip-torch and lightly are installed without their declared dependencies
(python/requirements/field-nodeps.txt): `import open_clip` and `import lightly` run the
packages' `__init__`, which import torchvision, and PyPI's torchvision cannot be paired
with the CPU torch here. Their loss files themselves need only torch. Nothing here copies
or edits a file: every module is the installed file, executed as it is.

- `package_dir(name)`: the directory of an installed top-level package, found with
  `importlib.util.find_spec(name)` (for a top-level name that runs no code of the package);
- `load_file(path, module_name)`: execute one file as a module of that name (registered in
  sys.modules while it runs, as an import would);
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
import importlib.util
import pathlib
import sys
import types


def package_dir(name):
    """The installed package's directory, or None (its __init__ is not executed)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return pathlib.Path(list(spec.submodule_search_locations)[0])


def load_file(path, module_name):
    """Execute the file at `path` as module `module_name` (the file as it is)."""
    path = pathlib.Path(path)
    if not path.is_file():
        raise ValueError(f"no file {path}")
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    return module


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
    saved = {key: sys.modules.get(key) for key in (standins or {})}
    for key, attributes in (standins or {}).items():
        module = types.ModuleType(key)
        module.__dict__.update(attributes)
        if "." not in key or any(k.startswith(key + ".") for k in standins):
            module.__path__ = []
        sys.modules[key] = module
    sys.meta_path.insert(0, finder)
    try:
        yield importlib.import_module
    finally:
        sys.meta_path.remove(finder)
        for key, module in saved.items():
            if module is None:
                sys.modules.pop(key, None)
            else:
                sys.modules[key] = module
