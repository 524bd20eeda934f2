"""Run `python3 ARGS...` (a script or -m module) if torch and pytest import; else exit 77
with a message naming what is missing (ctest's SKIP_RETURN_CODE); with INFONCE_NO_SKIP=1,
exit 1 instead (CI: the set-up should have provided both)."""

import os
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
          "(scripts/python-env.sh makes a venv with both)")
    sys.exit(1 if os.environ.get("INFONCE_NO_SKIP") == "1" else 77)

args = sys.argv[1:]
if args[:1] == ["-m"]:
    sys.argv = [args[1]] + args[2:]
    runpy.run_module(args[1], run_name="__main__", alter_sys=True)
else:
    sys.argv = args
    runpy.run_path(args[0], run_name="__main__")
