#!/usr/bin/env bash
# Duplicate code: pylint's duplicate-code check ([tool.pylint.similarities] in pyproject.toml: 15 equal lines in two
# places, imports, docstrings, comments and signatures left out) over the packages, bench/ and tests/; exits 1 on a
# duplicate and prints what it found and its time. Needs the dev extra (pylint).
#   bash scripts/dupcheck.sh
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s.%N)
set +e
.venv/bin/python scripts/dupcheck.py envs envhub sandbox api client agentrl trainer cli bench tests
rc=$?
set -e
echo "dupcheck: $(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s"
exit "$rc"
