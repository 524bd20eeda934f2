#!/usr/bin/env bash
# ms-swift in a layered venv beside the main one (issue 28): `.venv-swift` is a venv whose .pth
# puts the main venv's site-packages behind its own, so torch (and everything else already
# there) is not installed twice; pip installs ms-swift's own dependencies into it, among them
# transformers < 5.20 (ms-swift 4.6.0's pin), which shadows the main venv's 5.25 there only.
# The ms-swift adapter loads that install's swift/loss/embedding.py by path (INFONCE_SWIFT_SITES,
# or the checkout's .venv-swift by default). Measured 2026-12-06: 189 s (a loaded 2-core
# machine), 86 packages, ~800 MB.
# Usage: scripts/python-env-swift.sh [MAIN_VENV] [SWIFT_VENV]   (default .venv, .venv-swift)
set -euo pipefail
cd "$(dirname "$0")/.."
main=$(realpath -m "${1:-.venv}")
venv=$(realpath -m "${2:-.venv-swift}")
base_python=$("$main/bin/python" -c 'import sys; print(sys._base_executable)')
[[ -x $venv/bin/python ]] || "$base_python" -m venv "$venv" >&2
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
"$main/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' >"$site/zz-main-venv.pth"
"$venv/bin/python" -m pip --disable-pip-version-check -q install \
  -c python/requirements/constraints.txt ms-swift==4.6.0 2>&1 | grep -v "^WARNING: Location 'file:" >&2 || true
"$venv/bin/python" - <<'PY' >&2
import importlib.metadata as md
import torch
print("python-env-swift: ms-swift", md.version("ms-swift"), "torch", torch.__version__)
PY
echo "$site"
