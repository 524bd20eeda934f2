#!/usr/bin/env bash
# The whole test suite, in named stages (each prints its wall time):
#   suite          set-up (the venv with torch 2.13.0 and the field's packages: scripts/python-env.sh),
#                  the suite on the normal build (Release, g++); a skipped test fails the stage
#   fresh-root     scripts/fresh-root-check.sh: a Debian 12 debootstrap root, the README's
#                  first command, this script's set-up, a few tests (root only)
#   asan           the suite again under ASan + UBSan (Debug), but the torch-labelled tests
#   release-gcc    the suite's Release g++ build installed to a fresh prefix
#   consumer       examples/consumer built against that prefix, its test run
#   deb            cpack -G DEB in the Release build; the .deb extracted into a throwaway root,
#                  its infonce-sim run (--version, a 100-case campaign) from an empty directory
#   release-clang  Release build of the libraries and the CLI with clang++-14, with the tests
#                  and benchmarks off (BUILD_TESTING=OFF, INFONCE_BENCH=OFF)
#   wheel          pip wheel . (scikit-build-core, Debian's cmake, compiles through ccache in
#                  build-wheel/), installed into a fresh venv layered on the checkout's (torch
#                  2.13.0); its CLI runs a 100-case campaign through its worker from an empty
#                  directory, and pytest checks examples/torch-project with its plugin
# INFONCE_CI_STAGES="release-gcc consumer" runs only those stages (default: all, in this order).
# With fresh-root selected, its debootstrap starts in the background before the first stage
# (it waits on the network while the suite compiles); the fresh-root stage joins it.
# Warnings are errors in every build (scripts/setup.sh passes -DINFONCE_WERROR=ON).
# Compiles go through ccache (installed here), one cache for every stage and every checkout of
# this machine, kept in ~/.cache/infonce-sim/ccache (capped at 5 GB) unless CCACHE_DIR says
# otherwise: paths are taken relative to the checkout, so a fresh clone reuses the objects of
# an earlier one, and the fresh root reuses the suite's, proving the packages without
# compiling everything again (a missing header still fails in the preprocessor, a missing
# library at the link). A machine's first run compiles everything.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/toolchain.sh
jobs=$(nproc)
all_stages="suite fresh-root asan release-gcc consumer deb release-clang wheel"
default_stages="suite fresh-root asan release-gcc consumer deb release-clang wheel"
stages=${INFONCE_CI_STAGES:-$default_stages}
for stage in $stages; do
  [[ " $all_stages " == *" $stage "* ]] || {
    echo "test.sh: error: unknown stage '$stage' in INFONCE_CI_STAGES (stages: $all_stages)" >&2
    exit 2
  }
done

scripts/setup.sh --packages-only ccache
export CCACHE_DIR=${CCACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/infonce-sim/ccache}
mkdir -p "$CCACHE_DIR"
ccache --max-size=5G >/dev/null
# Paths relative to the checkout and the compiler judged by its contents, so that the
# same sources built from another directory or another root hit the same entries.
export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=1 CCACHE_COMPILERCHECK=content

stage_suite() {
  INFONCE_WITH_TORCH=1 scripts/setup.sh build
  # INFONCE_NO_SKIP: a Python test that would skip (torch, pytest or a field package missing)
  # fails instead; a ctest test skipped any other way fails the stage below.
  (cd build && INFONCE_NO_SKIP=1 ctest --output-on-failure -j "$jobs" --timeout 1200) |
    tee build/ctest-suite.log
  if grep -E '\*\*\*Skipped|Not Run' build/ctest-suite.log; then
    echo "test.sh: error: the suite skipped the tests above: the set-up missed what they need" >&2
    exit 1
  fi
}

stage_asan() {
  # No benchmarks: no test runs them, and their ASan build took ~1 CPU-minute.
  scripts/setup.sh build-asan -DINFONCE_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug -DINFONCE_BENCH=OFF
  # Property budgets shrink under the sanitizers (they run ~10x slower). The
  # torch-labelled tests check Python code against the CLI, which the C++
  # tests already run under the sanitizers: they run once, in the suite stage.
  # So do the README's sessions (label readme): full-size campaigns, as printed.
  (cd build-asan && INFONCE_SANITIZER_BUILD=1 ctest --output-on-failure -j "$jobs" --timeout 1200 \
    -LE "torch|readme")
}

# The suite's Release g++ build serves the install, the consumer and the .deb.
release_dir=build
release_prefix=$PWD/build-release-stage
stage_release-gcc() {
  [[ -x $release_dir/infonce-sim ]] || INFONCE_WITH_TORCH=1 scripts/setup.sh "$release_dir"
  grep -q '^CMAKE_BUILD_TYPE:STRING=Release$' "$release_dir/CMakeCache.txt" ||
    { echo "test.sh: error: $release_dir is not a Release build" >&2; exit 1; }
  rm -rf "$release_prefix"
  cmake --install "$release_dir" --prefix "$release_prefix"
  "$release_prefix/bin/infonce-sim" --version
}

stage_consumer() {
  [[ -x $release_prefix/bin/infonce-sim ]] || stage_release-gcc
  local consumer_build=build-consumer
  rm -rf "$consumer_build"
  cmake -S examples/consumer -B "$consumer_build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$release_prefix" -DCMAKE_CXX_FLAGS="-Wall -Wextra -Wpedantic -Werror"
  cmake --build "$consumer_build"
  (cd "$consumer_build" && ctest --output-on-failure)
}

stage_deb() {
  [[ -x $release_prefix/bin/infonce-sim ]] || stage_release-gcc
  scripts/setup.sh --packages-only dpkg-dev
  rm -f "$release_dir"/*.deb
  (cd "$release_dir" && cpack -G DEB)
  local deb root empty
  deb=$(ls "$release_dir"/infonce-sim_*.deb)
  dpkg-deb --field "$deb" Package Version Depends
  root=$(mktemp -d)
  empty=$(mktemp -d)
  dpkg -x "$deb" "$root"
  (cd "$empty" && "$root/usr/bin/infonce-sim" --version &&
    "$root/usr/bin/infonce-sim" check --seed 1 --cases 100 | tail -n 3 &&
    echo "deb: the campaign wrote: $(find . -mindepth 1 | sort | tr '\n' ' ')")
  rm -rf "$root" "$empty"
}

stage_release-clang() {
  scripts/setup.sh --packages-only clang-14
  scripts/setup.sh build-clang -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=clang++-14 \
    -DBUILD_TESTING=OFF -DINFONCE_BENCH=OFF
}

stage_wheel() {
  local python dist venv empty site
  python=$(scripts/python-env.sh "${INFONCE_VENV:-.venv}" | tail -n 1)
  dist=$(mktemp -d)
  # -Werror as in every build here; build-wheel/ keeps ninja's state between runs.
  "$python" -m pip wheel . --no-deps --wheel-dir "$dist" -c python/requirements/constraints.txt \
    -C build-dir=build-wheel -C cmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache \
    -C cmake.define.INFONCE_WERROR=ON
  ls "$dist"
  # A fresh venv that sees the checkout's site-packages (torch 2.13.0, numpy, pytest) through a
  # .pth file: pip finds torch>=2.0 satisfied and installs only the wheel.
  venv=$(mktemp -d)/venv
  "$python" -m venv "$venv"
  site=$("$python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
  "$venv/bin/python" -c 'import sys, sysconfig; open(sysconfig.get_path("purelib") + "/checkout-venv.pth", "w").write(sys.argv[1] + "\n")' "$site"
  "$venv/bin/python" -m pip install --disable-pip-version-check -q \
    -c python/requirements/constraints.txt "$dist"/infonce_sim-*.whl
  empty=$(mktemp -d)
  (cd "$empty" && "$venv/bin/infonce-sim" --version &&
    "$venv/bin/infonce-sim" check --seed 1 --cases 100 \
      --sut "$venv/bin/infonce-sim-worker --adapter conformance" | tail -n 2 &&
    echo "wheel: the campaign wrote: $(find . -mindepth 1 | sort | tr '\n' ' ')")
  # The example project as a user runs it: the installed plugin, the ci profile.
  (cd examples/torch-project && CI=1 "$venv/bin/python" -m pytest -p no:cacheprovider)
  rm -rf "$dist" "$(dirname "$venv")" "$empty"
}

fresh_root_dir=build-fresh-root
fresh_root_prepare_log=$fresh_root_dir/prepare.log
fresh_root_prepare_pid=""
start_fresh_root_prepare() {
  scripts/setup.sh --packages-only debootstrap
  mkdir -p "$fresh_root_dir"
  # Its own process group (setsid), so that a stage failing first stops it too.
  setsid scripts/fresh-root-check.sh --prepare-only "$fresh_root_dir" >"$fresh_root_prepare_log" 2>&1 &
  fresh_root_prepare_pid=$!
  trap 'stop_fresh_root_prepare' EXIT
}
stop_fresh_root_prepare() {
  [[ -z $fresh_root_prepare_pid ]] || kill -- "-$fresh_root_prepare_pid" 2>/dev/null || true
}

stage_fresh-root() {
  if [[ -n $fresh_root_prepare_pid ]]; then
    local prepare_rc=0
    wait "$fresh_root_prepare_pid" || prepare_rc=$?
    fresh_root_prepare_pid=""
    cat "$fresh_root_prepare_log"
    ((prepare_rc == 0)) ||
      { echo "test.sh: error: the fresh root's debootstrap failed (exit $prepare_rc)" >&2; exit 1; }
  fi
  scripts/setup.sh --packages-only debootstrap
  # Without torch there: the few tests it runs are C++ ones, and the suite
  # stage installs torch through the same setup.sh on this machine.
  INFONCE_FRESH_ROOT_TORCH=${INFONCE_FRESH_ROOT_TORCH:-0} scripts/fresh-root-check.sh "$fresh_root_dir"
}

[[ " $stages " != *" fresh-root "* ]] || start_fresh_root_prepare

total_start=$SECONDS
for stage in $stages; do
  echo "=== test.sh: stage $stage"
  start=$SECONDS
  "stage_$stage"
  echo "=== test.sh: stage $stage passed in $((SECONDS - start)) s"
done
echo "=== test.sh: stages [$stages] passed in $((SECONDS - total_start)) s"
