#!/usr/bin/env bash
# The CUDA paths, run on a machine with an NVIDIA GPU (CI has none): the hf engine's generation
# throughput on the GPU, then the main job's multi-turn training (SFT warm start, rollout through
# the hf engine, GRPO/GiGPO updates, export, held-out evaluation) with model.device=cuda, then the
# exact greedy evaluation of the warm start and the final model on the held-out maps.
#   bash bench/gpu/cuda_check.sh [key=value ...]       e.g. time_budget_s=240 rollout.scheduler.num_env_groups=64
# Needs torch with CUDA, transformers, tokenizers and the base dependencies importable by python3
# (PYTHONPATH may point at a folder of them); rockroll is imported from this checkout.
# Output: bench/out/cuda/ (tests.log, engine.log, train.log, exact.log).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT_DIR="${CUDA_CHECK_OUT:-bench/out/cuda}"
mkdir -p "$OUT_DIR"
PY="${PYTHON:-python3}"
if ! "$PY" -c "import rockroll.trainer" 2>/dev/null; then  # no install: import this checkout by its namespace
  link="$(mktemp -d)"
  ln -s "$PWD" "$link/rockroll"
  export PYTHONPATH="$link${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONUNBUFFERED=1
"$PY" -c "import torch, rockroll.trainer; assert torch.cuda.is_available(), 'no CUDA device'; print('torch', torch.__version__, torch.cuda.get_device_name())"
nvidia-smi -L || true

echo "== CUDA tests (pytest -m gpu)"
"$PY" -m pytest -q -m gpu -p no:cacheprovider tests/trainer/test_device.py 2>&1 | tee "$OUT_DIR/tests.log"

echo "== hf engine generation on CUDA (tokens/s)"
"$PY" bench/rollout/engine_bench.py --device cuda --concurrency 1 16 64 128 --new-tokens 64 2>&1 | tee "$OUT_DIR/engine.log"

echo "== main job's multi-turn training on CUDA"
"$PY" -c "import typer; from rockroll.cli.train import train; typer.run(train)" \
  configs/frozenlake_slippery.yaml model.device=cuda name=cuda-check --overwrite "$@" 2>&1 | tee "$OUT_DIR/train.log"

echo "== exact greedy success on the held-out maps"
"$PY" bench/learning/frozenlake_exact_eval.py --model runs/cuda-check/export/warmstart --model runs/cuda-check/export/final \
  2>&1 | tee "$OUT_DIR/exact.log"
