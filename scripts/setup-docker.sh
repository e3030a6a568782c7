#!/usr/bin/env bash
# Make a Docker daemon answer and build the sandbox image (idempotent; seconds when already done).
#   bash scripts/setup-docker.sh
# On a fresh Debian/Ubuntu machine: installs docker.io, debootstrap and bubblewrap, starts dockerd in the
# background if no daemon answers (log: $ROCKROLL_DOCKERD_LOG), then builds rockroll-sandbox:latest
# offline (`rockroll image build`: debootstrap base + host-built wheels). scripts/test.sh runs this
# and then exports ROCKROLL_REQUIRE_DOCKER=1, so Docker tests fail instead of skipping.
set -euo pipefail
cd "$(dirname "$0")/.."
LOG="${ROCKROLL_DOCKERD_LOG:-/var/log/rockroll-dockerd.log}"
SUDO=""
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then SUDO="sudo"; fi

need_pkgs=()
command -v dockerd >/dev/null 2>&1 || need_pkgs+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || need_pkgs+=(debootstrap)
command -v bwrap >/dev/null 2>&1 || need_pkgs+=(bubblewrap)  # namespaces for the process backend
# the process backend's seccomp filter (rockroll.sandbox.seccomp_filter compiles it with libseccomp)
{ /sbin/ldconfig -p 2>/dev/null || ldconfig -p 2>/dev/null || true; } | grep -q 'libseccomp\.so\.2' \
  || need_pkgs+=(libseccomp2)
if [ "${#need_pkgs[@]}" -gt 0 ]; then
  echo "setup-docker: installing ${need_pkgs[*]}"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${need_pkgs[@]}"
fi

if ! docker info >/dev/null 2>&1; then
  echo "setup-docker: starting dockerd (log: $LOG)"
  $SUDO mkdir -p "$(dirname "$LOG")"
  # setsid + nohup: the daemon outlives this script and the test run
  $SUDO setsid nohup dockerd >"$LOG" 2>&1 < /dev/null &
  for _ in $(seq 1 60); do
    if docker info >/dev/null 2>&1; then break; fi
    sleep 1
  done
  if ! docker info >/dev/null 2>&1; then
    echo "setup-docker: dockerd did not come up; last log lines:" >&2
    tail -n 30 "$LOG" >&2 || true
    exit 1
  fi
fi
echo "setup-docker: daemon $(docker info --format '{{.ServerVersion}}' 2>/dev/null) answers"

PY=.venv/bin/python
[ -x "$PY" ] || PY=python3
"$PY" -m rockroll.cli.image build
