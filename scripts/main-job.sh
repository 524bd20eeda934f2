#!/usr/bin/env bash
# The main job: set-up, then the default property campaign over the correct
# system, ending with the before/after table of the fix.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build
exec build/infonce-sim check --seed 1 --cases "${INFONCE_CASES:-20000}" --before-after "$@"
