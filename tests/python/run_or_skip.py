"""Run `python3 ARGS...` (a script or -m module) if torch and pytest import; else exit 77
with a message naming what is missing (ctest's SKIP_RETURN_CODE)."""

import runpy
import sys

missing = []
for name in ("torch", "pytest"):
    try:
        __import__(name)
    except Exception as e:  # noqa: BLE001 - any import failure means "not usable here"
        missing.append(f"{name} ({type(e).__name__}: {e})")
if missing:
    print(f"SKIPPED: not importable by {sys.executable}: {', '.join(missing)} "
          "(Debian: python3-torch python3-pytest)")
    sys.exit(77)

args = sys.argv[1:]
if args[:1] == ["-m"]:
    sys.argv = [args[1]] + args[2:]
    runpy.run_module(args[1], run_name="__main__", alter_sys=True)
else:
    sys.argv = args
    runpy.run_path(args[0], run_name="__main__")
