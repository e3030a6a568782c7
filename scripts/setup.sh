#!/usr/bin/env bash
# Install rockroll and its Python dependencies into .venv (idempotent).
#   EXTRAS=dev,train bash scripts/setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."
EXTRAS="${EXTRAS:-dev}"
# on Linux, always the sandbox extra: process sandboxes' seccomp filter (rockroll.sandbox.seccomp_filter)
if [ "$(uname -s)" = Linux ]; then
  case ",$EXTRAS," in *,sandbox,*) ;; *) EXTRAS="${EXTRAS:+$EXTRAS,}sandbox" ;; esac
fi
PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip setuptools wheel
case ",$EXTRAS," in
  *,train,*)
    # The CPU build of torch that installs offline here; the library itself accepts a range.
    .venv/bin/pip install -q "torch==${TORCH_VERSION:-2.13.0}" ;;
esac
.venv/bin/pip install -q -e ".[${EXTRAS}]"
case ",$EXTRAS," in
  *,train,*)
    # xgrammar (rollout.episode.restrict_tool_calls) without the triton its wheel requires (1 GB, GPU kernels only);
    # its other dependencies (torch, transformers, pydantic, numpy) come with the train extra
    .venv/bin/pip install -q --no-deps "xgrammar==0.2.9" "apache-tvm-ffi==0.1.15.post2" ;;
esac
# Run as root, process sandboxes (and job workers) drop to this unprivileged user (rockroll.sandbox.confine)
if [ "$(id -u)" -eq 0 ] && ! id rockroll-sandbox >/dev/null 2>&1 && command -v useradd >/dev/null 2>&1; then
  useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin rockroll-sandbox
fi
echo "rockroll installed in .venv with extras [${EXTRAS}]"
