# Sourced by the scripts: the build tools they call, chosen deliberately.
# cmake, ctest and cpack are Debian's (3.25, package cmake), not the first on PATH: a pip
# `cmake` 4.x (pyenv puts one first here) refuses cmake_minimum_required below 3.5 in
# package configs and drops FindBoost (CMP0167), and the fresh Debian root, where the same
# scripts run, has only Debian's. Set INFONCE_CMAKE_DIR to use another directory's tools.
cmake_dir=${INFONCE_CMAKE_DIR:-/usr/bin}
cmake() { "$cmake_dir/cmake" "$@"; }
ctest() { "$cmake_dir/ctest" "$@"; }
cpack() { "$cmake_dir/cpack" "$@"; }
