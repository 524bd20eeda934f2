#!/usr/bin/env bash
# Set-up on a fresh Debian 12 machine: installs the packages that are missing,
# configures and builds. Usage: scripts/setup.sh [BUILD_DIR] [extra cmake args...]
#   scripts/setup.sh --packages-only PACKAGE...   installs those of PACKAGE... that are missing
# INFONCE_WITH_TORCH=1 also makes the Python side's virtual environment (scripts/python-env.sh:
# .venv with torch 2.13.0 and the field's packages, pinned in python/requirements/) and points
# the build's Python tests at it (-DINFONCE_TORCH_PYTHON). INFONCE_VENV names another venv.
# INFONCE_SETUP_TARGET=T builds only target T (scripts/main-job.sh: the CLI).
# Warnings are errors here (-DINFONCE_WERROR=ON); pass -DINFONCE_WERROR=OFF to
# override. apt's own output is shown, one line per package and phase.
# The build type is Release (the build the CLI ships as; pass -DCMAKE_BUILD_TYPE=...
# to change it). When ccache is on PATH, compiles go through it.
set -euo pipefail
cd "$(dirname "$0")/.."

# libgmock-dev: six tests include <gmock/gmock.h> (libgtest-dev alone lacks it).
packages=(g++ cmake ninja-build libboost-fiber-dev libboost-context-dev
  libboost-program-options-dev libeigen3-dev librapidcheck-dev libgtest-dev libgmock-dev
  libbenchmark-dev libmimalloc-dev nlohmann-json3-dev libopenmpi-dev openmpi-bin python3)
source scripts/toolchain.sh

install_missing() {
  local missing=() package sudo=""
  for package in "$@"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
      missing+=("$package")
  done
  if ((${#missing[@]} == 0)); then
    echo "setup: the $# packages needed are installed already"
    return
  fi
  [[ $(id -u) == 0 ]] || sudo="sudo"
  echo "setup: [apt 1/2] apt-get update"
  $sudo apt-get update -q
  echo "setup: [apt 2/2] installing ${#missing[@]} missing package(s) and their dependencies:" \
    "${missing[*]}"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends \
    -o Dpkg::Use-Pty=0 "${missing[@]}"
  echo "setup: packages installed"
}

if [[ "${1:-}" == --packages-only ]]; then
  shift
  install_missing "$@"
  exit 0
fi
install_missing "${packages[@]}"

build_dir="${1:-build}"
shift || true
torch_python=()
if [[ "${INFONCE_WITH_TORCH:-0}" == 1 ]]; then
  python=$(scripts/python-env.sh "${INFONCE_VENV:-.venv}" | tail -n 1)
  torch_python=(-DINFONCE_TORCH_PYTHON="$python")
fi
launcher=()
if command -v ccache >/dev/null && [[ " $* " != *COMPILER_LAUNCHER* ]]; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  echo "setup: compiling through ccache ($(ccache --get-config cache_dir 2>/dev/null || echo '?'))"
fi
echo "setup: configuring $build_dir"
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DINFONCE_WERROR=ON \
  "${launcher[@]}" "${torch_python[@]}" "$@"
if [[ -n "${INFONCE_SETUP_TARGET:-}" ]]; then
  echo "setup: building $INFONCE_SETUP_TARGET in $build_dir"
  cmake --build "$build_dir" --target "$INFONCE_SETUP_TARGET"
else
  echo "setup: building everything in $build_dir"
  cmake --build "$build_dir"
fi
