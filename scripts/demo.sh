#!/usr/bin/env bash
# The main job on a fresh machine: install rockroll, then run it on the embedded defaults.
# (Until the trainer lands this is the scripted demo: random vs expert play on the built-in envs.)
set -euo pipefail
cd "$(dirname "$0")/.."
EXTRAS="${EXTRAS:-dev}" bash scripts/setup.sh
.venv/bin/rockroll demo "$@"
