#!/usr/bin/env bash
# Everything that needs a GPU, in about 8 minutes on one H100/H200 (CI has no GPU):
#   1. the CUDA tests (pytest -m gpu);
#   2. a training step of the tiny model and of a ~0.5B Qwen2-shaped model (random weights, or
#      GPU_CHECK_MODEL=DIR for a local model): forward/backward/optimizer time and peak memory;
#   3. hf engine generation tokens/s at 1/16/64/128 concurrent requests (tiny and ~0.5B models).
#   bash bench/gpu/gpu_check.sh
# Needs torch with CUDA and rockroll's dependencies importable by $PYTHON (default python3); rockroll
# is imported from this checkout. Output: bench/results/gpu_<device>_<date>/ (one log per part, JSON
# summaries) and its summary.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY="${PYTHON:-python3}"
if ! "$PY" -c "import rockroll.trainer" 2>/dev/null; then  # no install: import this checkout by its namespace
  link="$(mktemp -d)"
  ln -s "$PWD" "$link/rockroll"
  export PYTHONPATH="$link${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONUNBUFFERED=1
device="$("$PY" -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'; print(torch.cuda.get_device_name().replace(' ', '-'))")"
OUT="${GPU_CHECK_OUT:-bench/results/gpu_${device}_$(date +%Y%m%d)}"
mkdir -p "$OUT"
nvidia-smi -L | tee "$OUT/device.txt" || true
big=(--size 0.5b)
[ -n "${GPU_CHECK_MODEL:-}" ] && big=(--model "$GPU_CHECK_MODEL")

echo "== 1. CUDA tests"
timeout 180 "$PY" -m pytest -q -m gpu -p no:cacheprovider tests 2>&1 | tail -n 20 | tee "$OUT/tests.log" || true

echo "== 2. training step: tiny, then ~0.5B"
timeout 60 "$PY" bench/gpu/gpu_step.py --size tiny --batch 64 --seq 256 --out "$OUT/step_tiny.json" 2>&1 | tee "$OUT/step_tiny.log"
timeout 120 "$PY" bench/gpu/gpu_step.py "${big[@]}" --batch 8 --seq 1024 --out "$OUT/step_big.json" 2>&1 | tee "$OUT/step_big.log"

echo "== 3. hf engine tokens/s"
timeout 90 "$PY" bench/rollout/engine_bench.py --device cuda --concurrency 1 16 64 128 --new-tokens 64 2>&1 | tee "$OUT/engine_tiny.log"
bigdir="${GPU_CHECK_MODEL:-}"
if [ -z "$bigdir" ]; then
  bigdir="$(mktemp -d)"
  "$PY" -c "import sys; from rockroll.agentrl.models.tiny import TinyModelConfig, build_tiny_model; \
build_tiny_model(sys.argv[1], TinyModelConfig(hidden_size=896, num_layers=24, num_heads=14, num_kv_heads=2, intermediate_size=4864))" "$bigdir"
fi
timeout 150 "$PY" bench/rollout/engine_bench.py --model "$bigdir" --device cuda --concurrency 1 16 64 128 --new-tokens 64 2>&1 | tee "$OUT/engine_big.log"

{
  echo "# GPU check on $device, $(date -u +%Y-%m-%dT%H:%MZ)"
  echo; echo '## Training step (median of 5 after a warm-up)'; echo
  for f in "$OUT"/step_*.json; do echo '```'; cat "$f"; echo '```'; done
  echo; echo '## hf engine'; echo; echo '```'; tail -n 12 "$OUT/engine_tiny.log"; tail -n 12 "$OUT/engine_big.log"; echo '```'
  echo; echo '## CUDA tests'; echo; echo '```'; tail -n 5 "$OUT/tests.log"; echo '```'
} > "$OUT/summary.md"
echo "wrote $OUT/summary.md"
