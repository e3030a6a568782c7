#!/usr/bin/env bash
# Build the docs site (mkdocs.yml, docs/) into site/ with `mkdocs build --strict`: any warning fails it, a broken
# link or anchor included. The pages generated from the code are made by docs/hooks/generate.py during the build.
# Needs the docs extra (EXTRAS=dev,docs bash scripts/setup.sh).
#   bash scripts/docs.sh [mkdocs build args...]      e.g. --site-dir /tmp/site
set -euo pipefail
cd "$(dirname "$0")/.."
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
start=$(date +%s.%N)
set +e
NO_MKDOCS_2_WARNING=1 .venv/bin/python -m mkdocs build --strict --clean "$@" >"$log" 2>&1
rc=$?
set -e
elapsed=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
cat "$log"
if [ "$rc" -eq 0 ] && grep -qE "^(WARNING|ERROR)" "$log"; then
  echo "docs: warnings in the build (above)" >&2
  rc=1
fi
if [ "$rc" -ne 0 ]; then
  echo "docs: build FAILED after ${elapsed} s" >&2
  exit "$rc"
fi
echo "docs: built the site in ${elapsed} s"
