#!/usr/bin/env bash
# The main command, training edition: on a fresh machine install rockroll with the train extra,
# build a tiny local model, and train it with GRPO on FrozenLake 4x4 through process sandboxes
# (SQLite-backed sandbox manager, the actor update on a local Ray worker), printing held-out
# success before the SFT warm start, before RL and after RL.
#   bash scripts/demo.sh [key=value ...]      e.g. time_budget_s=300
set -euo pipefail
cd "$(dirname "$0")/.."
EXTRAS="${EXTRAS:-dev,train}" bash scripts/setup.sh
export RAY_ADDRESS=""  # start a local Ray instance, never join a foreign one
.venv/bin/rockroll train configs/frozenlake_tiny.yaml rollout.sandbox=process workers.use_ray=true name=train-demo "$@"
