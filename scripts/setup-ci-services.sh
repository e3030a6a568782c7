#!/usr/bin/env bash
# Services the API tests use beyond Python: headless Chromium + chromedriver (the /ui test) and a
# PostgreSQL server (the database test). Idempotent; needs root (or sudo) for apt-get.
# Prints the PostgreSQL URL for tests on its last line.
#   bash scripts/setup-ci-services.sh
set -euo pipefail
SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
need=()
command -v chromium >/dev/null || need+=(chromium)
command -v chromedriver >/dev/null || need+=(chromium-driver)
command -v pg_ctlcluster >/dev/null || need+=(postgresql)
if [ "${#need[@]}" -gt 0 ]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
ver="$(ls /usr/lib/postgresql | sort -V | tail -n 1)"
if ! pg_lsclusters -h | grep -q "^$ver main"; then
  $SUDO pg_createcluster "$ver" main >/dev/null
fi
if ! pg_lsclusters -h | grep "^$ver main" | grep -q online; then
  $SUDO pg_ctlcluster "$ver" main start
fi
AS_PG="runuser -u postgres --"
if [ -n "$SUDO" ]; then AS_PG="sudo -u postgres"; fi
psql_admin() { (cd / && $AS_PG psql -v ON_ERROR_STOP=1 -qtAc "$1"); }
if [ "$(psql_admin "SELECT 1 FROM pg_roles WHERE rolname='rockroll'")" != "1" ]; then
  psql_admin "CREATE ROLE rockroll LOGIN PASSWORD 'rockroll' CREATEDB"
fi
if [ "$(psql_admin "SELECT 1 FROM pg_database WHERE datname='rockroll'")" != "1" ]; then
  psql_admin "CREATE DATABASE rockroll OWNER rockroll"
fi
echo "postgresql+psycopg://rockroll:rockroll@127.0.0.1:5432/rockroll"
