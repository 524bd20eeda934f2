#!/usr/bin/env bash
# The main job: set-up (building only the CLI it runs), then the default
# property campaign over the correct system, ending with the before/after
# table of the fix. INFONCE_CASES sets the case count (default 20000).
set -euo pipefail
cd "$(dirname "$0")/.."
INFONCE_SETUP_TARGET=infonce-sim scripts/setup.sh build
exec build/infonce-sim check --seed 1 --cases "${INFONCE_CASES:-20000}" --before-after "$@"
