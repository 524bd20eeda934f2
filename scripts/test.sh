#!/usr/bin/env bash
# The whole test suite: set-up (with torch for the DDP conformance test), the
# suite on the normal build, then the suite again under ASan + UBSan.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)

INFONCE_WITH_TORCH=1 scripts/setup.sh build
(cd build && ctest --output-on-failure -j "$jobs" --timeout 1200)

scripts/setup.sh build-asan -DINFONCE_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
# Property budgets shrink under the sanitizers (they run ~10x slower).
(cd build-asan && INFONCE_SANITIZER_BUILD=1 ctest --output-on-failure -j "$jobs" --timeout 1200)
