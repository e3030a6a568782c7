#!/usr/bin/env bash
# The main command, training edition: on a fresh machine install rockroll with the train extra,
# build a tiny local model, warm-start it on the expert's multi-turn play and train it with
# multi-turn GRPO (per-turn GiGPO credit) on slippery FrozenLake 4x4 through process sandboxes
# (SQLite-backed sandbox manager, the actor update on a local Ray worker). It prints held-out
# success by shortest-path length before the warm start, after it and after RL, next to exact
# references on the same maps (value-iteration optimum, best blind plan, re-planning expert); then
# the exact success of the warm start's and the final policy's greedy choices on those maps (every
# cell asked, scored by dynamic programming over the slips: no sampling noise), by path length.
#   bash scripts/demo.sh [key=value ...]      e.g. total_steps=300 (a fixed number of steps, no time budget)
set -euo pipefail
cd "$(dirname "$0")/.."
EXTRAS="${EXTRAS:-dev,train}" bash scripts/setup.sh
export RAY_ADDRESS=""  # start a local Ray instance, never join a foreign one
.venv/bin/rockroll train configs/frozenlake_slippery.yaml rollout.sandbox=process workers.use_ray=true name=train-demo --overwrite "$@"
run=train-demo
for arg in "$@"; do case "$arg" in name=*) run="${arg#name=}" ;; esac; done
echo
echo "exact greedy success on the same held-out maps:"
.venv/bin/python bench/learning/frozenlake_exact_eval.py --model "runs/$run/export/warmstart" --model "runs/$run/export/final" 2>/dev/null
