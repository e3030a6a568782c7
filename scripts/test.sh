#!/usr/bin/env bash
# Install everything the test suite needs on a fresh machine, then run the whole suite.
#   bash scripts/test.sh [pytest args...]      the whole suite, on parallel workers (ROCKROLL_TEST_WORKERS, 3)
#   bash scripts/test.sh -m "not slow"         the fast lane of the inner loop (a few minutes)
# On a loaded machine (the suite must pass there too), beside a bounded load generator:
#   python3 bench/harness/cpu_load.py --procs 2 --seconds 10800 & bash scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
EXTRAS="${EXTRAS:-dev,train,rlvr,docs}" bash scripts/setup.sh
# DeepSpeed (the gpu extra's ZeRO strategy) runs on CPU too: install it without building its CUDA ops so the
# tests of the deepspeed strategy run instead of skipping (--no-build-isolation: its setup imports our torch)
if ! .venv/bin/python -c "import deepspeed" >/dev/null 2>&1; then
  DS_BUILD_OPS=0 .venv/bin/pip install -q --no-build-isolation "deepspeed==0.19.8"
fi
# vLLM in a venv of its own (.venv-vllm; it pins other versions of transformers/fastapi/numpy): the vLLM
# engine's tests run through it, and skip with the reason it prints where it could not be built
if [ "${ROCKROLL_SKIP_VLLM:-0}" != "1" ]; then
  bash scripts/setup-vllm.sh
fi
# openenv-core in a venv of its own (.venv-openenv; it pins gradio, which moves pillow): the OpenEnv interop
# tests run OpenEnv's side through it, and skip with the reason it prints where it could not be built
if [ "${ROCKROLL_SKIP_OPENENV:-0}" != "1" ]; then
  bash scripts/setup-openenv.sh
fi
if [ -f scripts/setup-docker.sh ] && [ "${ROCKROLL_SKIP_DOCKER:-0}" != "1" ]; then
  bash scripts/setup-docker.sh
  export ROCKROLL_REQUIRE_DOCKER=1  # the daemon is up: Docker tests must run, not skip
fi
if [ "${ROCKROLL_SKIP_SERVICES:-0}" != "1" ]; then
  # chromium + chromedriver and PostgreSQL for tests/api (the last line printed is the database URL)
  ROCKROLL_TEST_PG_URL="$(bash scripts/setup-ci-services.sh | tail -n 1)"
  export ROCKROLL_TEST_PG_URL
fi
# lint and formatting are part of the suite (ruff, configured in pyproject.toml)
.venv/bin/ruff check .
.venv/bin/ruff format --check .
# types: mypy over every package, strict on the contracts ([tool.mypy]); prints the Any / type: ignore counts
.venv/bin/python scripts/typecheck.py
# the docs site (docs/, mkdocs.yml) builds with no warning: dead links and missing pages fail
bash scripts/docs.sh
# duplicate code: a block of 15 or more equal lines in two places fails (pylint's similarity check; pyproject.toml)
bash scripts/dupcheck.sh
set +e
# parallel workers (pytest-xdist); a file's tests stay on one worker (its module fixtures built once), and tests
# marked exclusive run alone (tests/suite_plugin.py, which also prints the time against the budget)
.venv/bin/python -m pytest -n "${ROCKROLL_TEST_WORKERS:-3}" --dist loadfile "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests" >&2
  exit 1
fi
exit "$rc"
