#!/usr/bin/env bash
# Set-up on a fresh Debian 12 machine: installs the packages that are missing,
# configures and builds. Usage: scripts/setup.sh [BUILD_DIR] [extra cmake args...]
# INFONCE_WITH_TORCH=1 also installs Debian's python3-torch (the DDP conformance test).
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(g++ cmake ninja-build libboost-fiber-dev libboost-context-dev
  libboost-program-options-dev libeigen3-dev librapidcheck-dev libgtest-dev
  libbenchmark-dev libmimalloc-dev nlohmann-json3-dev libopenmpi-dev openmpi-bin python3)
if [[ "${INFONCE_WITH_TORCH:-0}" == 1 ]]; then
  packages+=(python3-torch python3-numpy)
fi

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$package")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [[ $(id -u) == 0 ]] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
fi

build_dir="${1:-build}"
shift || true
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
cmake --build "$build_dir"
