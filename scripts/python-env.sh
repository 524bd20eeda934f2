#!/usr/bin/env bash
# The Python side's virtual environment: creates it when missing and installs the pinned
# requirements into it (pip skips what is there already). Prints the interpreter's path
# as its last line.
# Usage: scripts/python-env.sh [VENV_DIR]          (default .venv in the checkout)
#   INFONCE_PYTHON      the interpreter that makes the venv (default: Debian's /usr/bin/python3.11
#                       when it is there, else python3.11, else python3 from PATH). Debian builds
#                       CPython with PGO and LTO; pyenv's build, first on PATH here, has neither,
#                       and the torch worker spends ~7% more CPU per case on it.
#   INFONCE_PY_PROFILE  core: torch, numpy, pytest (what the suite's own Python tests need)
#                       field (default): core plus the field's packages (python/requirements/field.txt),
#                       and VENV-pylate: pylate with its own pins (python/requirements/pylate.txt)
#                       in a second venv layered on VENV (a .pth names VENV's site-packages:
#                       torch is VENV's); pylate pins a sentence-transformers that VENV's conflicts with
# torch is pinned to 2.13.0, the CPU wheel that pip finds on this machine kind's disk: an
# unpinned torch (or a newer range, asked for by another package) pulls a multi-GB CUDA build.
# Every file is a pip requirements file with exact pins; python/requirements/constraints.txt
# holds torch back while the field's packages resolve.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=$(realpath -m "${1:-.venv}")
profile=${INFONCE_PY_PROFILE:-field}
case $profile in
  core | field) ;;
  *) echo "python-env: error: INFONCE_PY_PROFILE must be core or field, not '$profile'" >&2; exit 2 ;;
esac
debian_python=/usr/bin/python3.11
[[ -x $debian_python ]] && "$debian_python" -c 'import ensurepip, venv' 2>/dev/null || debian_python=
base_python=${INFONCE_PYTHON:-${debian_python:-$(command -v python3.11 || command -v python3)}}
[[ -n $base_python ]] || { echo "python-env: error: no python3 on PATH" >&2; exit 2; }

if [[ ! -x $venv/bin/python ]]; then
  echo "python-env: creating $venv with $("$base_python" --version 2>&1) ($base_python)" >&2
  "$base_python" -m venv "$venv" >&2
fi
pip=("$venv/bin/python" -m pip --disable-pip-version-check -q)
req=python/requirements
# Runs one pip command; shows its output but the noise of this machine's find-links and of
# layering; a failing pip fails the script, naming the command.
run_pip() {
  local log status=0
  log=$(mktemp)
  "$@" >"$log" 2>&1 || status=$?
  grep -v "^WARNING: Location 'file:\|outside environment\|^ *Can't uninstall\|^ *Found existing\|^ *Not uninstalling" \
    "$log" >&2 || true
  rm -f "$log"
  ((status == 0)) || { echo "python-env: error: pip failed (exit $status): ${*:2}" >&2; exit 1; }
}
# pip first: the base interpreter's bundled one differs (python/requirements/pip.txt)
run_pip "${pip[@]}" install -r "$req/pip.txt"
echo "python-env: [1/3] core: $(grep -v '^#' "$req/core.txt" | tr '\n' ' ')" >&2
run_pip "${pip[@]}" install -c "$req/constraints.txt" -r "$req/core.txt"
if [[ $profile == field ]]; then
  echo "python-env: [2/3] the field's packages (python/requirements/field.txt)" >&2
  run_pip "${pip[@]}" install -c "$req/constraints.txt" -r "$req/field.txt"
  # Packages whose declared dependencies pull torchvision or a GPU stack that pip cannot
  # pair with the CPU torch here: installed without them (their loss modules need none).
  run_pip "${pip[@]}" install --no-deps -c "$req/constraints.txt" -r "$req/field-nodeps.txt"
  # lightly before PR #1531, beside the installed one (not on the path): the lightly
  # adapter's --option site=before-1531 loads it, to tell the two GatherLayers apart.
  [[ -d $venv/lightly-1.5.0/lightly ]] ||
    run_pip "${pip[@]}" install --no-deps --target "$venv/lightly-1.5.0" -r "$req/lightly-before-1531.txt"
  layered=$venv-pylate
  echo "python-env: [3/3] pylate in $layered, layered on $venv (python/requirements/pylate.txt)" >&2
  if [[ ! -x $layered/bin/python ]]; then
    "$(realpath "$venv/bin/python")" -m venv "$layered" >&2  # the same base interpreter as VENV's
  fi
  site() { "$1/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'; }
  site "$venv" >"$(site "$layered")/zz-infonce-main-venv.pth"
  run_pip "$layered/bin/python" -m pip --disable-pip-version-check -q install \
    -c "$req/constraints.txt" -r "$req/pylate.txt"
fi
"$venv/bin/python" - <<'EOF' >&2
import importlib.metadata as md
import torch
print(f"python-env: torch {torch.__version__}, numpy {md.version('numpy')}, pytest {md.version('pytest')}")
EOF
echo "$venv/bin/python"
