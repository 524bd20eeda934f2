#!/usr/bin/env bash
# Fresh-machine check: a Debian 12 root made by debootstrap (minbase, nothing
# else), this checkout copied in, then the README's first command
# (scripts/main-job.sh, a small case count), then the test command's own
# install-and-build step (scripts/setup.sh as scripts/test.sh calls it) and a
# few of the suite's tests. A package that the scripts forget to install fails
# here, even on a machine that happens to have it.
#
# Usage: scripts/fresh-root-check.sh [--prepare-only] [WORK_DIR]
#                                      (as root; default WORK_DIR build-fresh-root)
#   --prepare-only            only make the cached minbase tarball, then stop: scripts/test.sh
#                             runs this in the background while the suite builds (debootstrap
#                             waits on the network, the build on the CPU)
#   INFONCE_FRESH_ROOT_CASES  cases for the main job (default 200)
#   INFONCE_FRESH_ROOT_TESTS  ctest -R regex for the few tests (default below)
#   INFONCE_FRESH_ROOT_TORCH  0 (default): the C++ side only; 1 also makes the Python venv
#                             (needs python3-venv in the root, which the scripts do not install)
#   INFONCE_FRESH_ROOT_ONLY   "bare" builds only the CLI and libraries with
#                             -DBUILD_TESTING=OFF -DINFONCE_BENCH=OFF -DINFONCE_MPI=OFF
#                             after installing just compiler, cmake, ninja, Boost,
#                             Eigen, RapidCheck and nlohmann-json (no main job)
#   CCACHE_DIR                when set to a directory (scripts/test.sh sets it), that
#                             compiler cache is mounted into the root and ccache installed
#                             there first: the root's builds reuse objects compiled from the
#                             same sources outside. Only objects are reused: a package the
#                             scripts forget still fails, in the preprocessor or at the link.
# The minbase tarball is cached in WORK_DIR/debian12-minbase.tar; the root
# itself is made afresh on every run. The Debian mirror is the host's own,
# read at run time from its apt sources.
set -euo pipefail
cd "$(dirname "$0")/.."
source_dir=$PWD
prepare_only=0
if [[ ${1:-} == --prepare-only ]]; then
  prepare_only=1
  shift
fi
work_dir=$(realpath -m "${1:-build-fresh-root}")
cases=${INFONCE_FRESH_ROOT_CASES:-200}
tests=${INFONCE_FRESH_ROOT_TESTS:-'^(cli\.version|cli\.CommandLine\..*|loss\.HandCases\..*|casefile\..*|sim\.Mesh\..*|mpi\.conformance_np2|tool\.corpus_replay)$'}
torch=${INFONCE_FRESH_ROOT_TORCH:-0}
only=${INFONCE_FRESH_ROOT_ONLY:-}

fail() {
  echo "fresh-root: error: $*" >&2
  exit 2
}
[[ $(id -u) == 0 ]] || fail "needs root (debootstrap, chroot, mounts)"
command -v debootstrap >/dev/null || fail "debootstrap not installed (apt-get install debootstrap)"

# The first Debian (not security) archive of the host's apt sources, deb822
# (.sources) first, then one-line sources.list format.
host_mirror() {
  local file
  for file in /etc/apt/sources.list.d/*.sources; do
    [[ -f $file ]] || continue
    awk 'BEGIN { RS = ""; FS = "\n" }
         /(^|\n)Types:[^\n]*deb( |$|\n)/ && /(^|\n)Suites:[^\n]*bookworm( |\n|$)/ {
           for (i = 1; i <= NF; i++) if ($i ~ /^URIs:/) { split($i, u, " "); print u[2]; exit } }' \
      "$file"
  done
  for file in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [[ -f $file ]] || continue
    sed -E 's/\[[^]]*\]//' "$file" | awk '$1 == "deb" && $3 == "bookworm" { print $2; exit }'
  done
}

mirror=$(host_mirror | head -n 1)
[[ -n $mirror ]] || fail "no bookworm 'deb' source found in /etc/apt/sources.list{,.d}"

mkdir -p "$work_dir"
tarball=$work_dir/debian12-minbase.tar
if [[ ! -f $tarball ]]; then
  echo "fresh-root: debootstrap --variant=minbase bookworm (cached in $tarball)"
  staging=$(mktemp -d "$work_dir/debootstrap.XXXXXX")
  debootstrap --variant=minbase bookworm "$staging" "$mirror" |
    grep -E '^I: (Retrieving Release|Installing core|Installing base|Base system)' || true
  [[ -x $staging/usr/bin/apt-get ]] || fail "debootstrap did not produce a root in $staging"
  tar -C "$staging" -cf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
  rm -rf "$staging"
fi
if ((prepare_only)); then
  echo "fresh-root: prepared $tarball"
  exit 0
fi

root=$work_dir/root
rm -rf "$root"
mkdir -p "$root"
tar -C "$root" -xf "$tarball"
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true

# The checkout as it stands (tracked and new files, not what .gitignore
# excludes such as build directories), without .git: a downloaded source tree.
clone=$root/root/infonce-sim
mkdir -p "$clone"
git -C "$source_dir" ls-files -z --cached --others --exclude-standard |
  (cd "$source_dir" && xargs -0 tar -cf - --no-recursion --ignore-failed-read) | tar -C "$clone" -xf -

# The compiler cache, when given: mounted at /root/ccache, paths relative to the checkout.
cache_env=()
cache_step=""
if [[ -n ${CCACHE_DIR:-} && -d ${CCACHE_DIR:-} && $only != bare ]]; then
  mkdir -p "$root/root/ccache"
  cache_env=(CCACHE_DIR=/root/ccache CCACHE_BASEDIR=/root/infonce-sim CCACHE_NOHASHDIR=1
    CCACHE_COMPILERCHECK=content)
  cache_step='echo "fresh-root: [0/3] the compiler cache: apt-get install ccache"
apt-get update -q >/dev/null
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends ccache >/dev/null
'
fi

# What runs inside: exactly the README's commands and scripts/test.sh's set-up.
if [[ $only == bare ]]; then
  inner=$(
    cat <<'EOF'
apt-get update
DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
  g++ cmake ninja-build libboost-fiber-dev libboost-context-dev libboost-program-options-dev \
  libeigen3-dev librapidcheck-dev nlohmann-json3-dev | grep -E '^(Get|Setting up|[0-9]+ upgraded)' | tail -n 3
cd /root/infonce-sim
cmake -S . -B build-bare -G Ninja -DCMAKE_BUILD_TYPE=Release -DINFONCE_WERROR=ON \
  -DBUILD_TESTING=OFF -DINFONCE_BENCH=OFF -DINFONCE_MPI=OFF
cmake --build build-bare -j2
build-bare/infonce-sim --version
build-bare/infonce-sim check --seed 1 --cases 100 --no-corpus | tail -n 2
EOF
  )
else
  inner=$(
    cat <<EOF
${cache_step}cd /root/infonce-sim
echo "fresh-root: [1/3] INFONCE_CASES=$cases scripts/main-job.sh"
INFONCE_CASES=$cases scripts/main-job.sh
echo "fresh-root: [2/3] the test command's set-up: INFONCE_WITH_TORCH=$torch scripts/setup.sh build"
INFONCE_WITH_TORCH=$torch scripts/setup.sh build
echo "fresh-root: [3/3] ctest -R '$tests'"
cd build && ctest --output-on-failure -j 2 -R '$tests'
EOF
  )
fi

# Mounts are made in a private mount namespace, so they go away with it.
echo "fresh-root: running in $root"
unshare --mount --propagation private bash -euo pipefail -c '
  root=$1 inner=$2 cache=$3
  shift 3
  [[ -z $cache ]] || mount --bind "$cache" "$root/root/ccache"
  mount -t proc proc "$root/proc"
  mount --rbind /dev "$root/dev"
  mount -t sysfs sys "$root/sys"
  mount -t tmpfs tmpfs "$root/tmp"
  exec chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@" \
    bash -euo pipefail -c "$inner"' fresh-root "$root" "$inner" "${cache_env:+$CCACHE_DIR}" \
  "${cache_env[@]}"
echo "fresh-root: passed"
