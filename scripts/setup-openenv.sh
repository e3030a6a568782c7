#!/usr/bin/env bash
# Build the OpenEnv venv (.venv-openenv) that the OpenEnv interop tests (tests/api/test_openenv.py) run
# OpenEnv's own side in: its client (GenericEnvClient) playing rockroll's /openenv face, its `openenv init`
# echo env served by its own create_app for rockroll's `openenv` env source, its `validate --url` checker.
# openenv-core pins gradio, which moves .venv's pillow (13 -> 12.x), so it lives beside .venv, not in it; rockroll
# itself never imports it (both sides only share the wire protocol). Prints one line saying what happened; exits 0
# even when the build fails, so the tests that need it skip with that reason (written to .venv-openenv.status).
set -uo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-openenv
STATUS=.venv-openenv.status
OPENENV_SPEC="${OPENENV_SPEC:-openenv-core==0.3.0}"
PY="${PYTHON:-python3}"
CHECK="import openenv.core, openenv.core.env_server.http_server, openenv.cli._validation, uvicorn"
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "$CHECK" >/dev/null 2>&1; then
  echo "ok" > "$STATUS"; echo "OpenEnv venv ready ($VENV)"; exit 0
fi
fail() { echo "failed: $1" > "$STATUS"; echo "OpenEnv venv not built: $1 (OpenEnv interop tests will skip)"; exit 0; }
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV" || fail "python -m venv"
"$VENV/bin/pip" install -q --upgrade pip >/dev/null 2>&1
"$VENV/bin/pip" install -q "$OPENENV_SPEC" >"$VENV/install.log" 2>&1 || fail "pip install $OPENENV_SPEC (see $VENV/install.log)"
"$VENV/bin/python" -c "$CHECK" || fail "import openenv.core in $VENV"
echo "ok" > "$STATUS"
echo "OpenEnv venv ready ($VENV)"
