"""A real ``rockroll serve-model`` subprocess on a free loopback port (for the serve and eval tests)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROCKROLL = str(Path(sys.executable).with_name("rockroll"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def model_server(
    model_dir: Path, name: str = "tiny", args: tuple[str, ...] = (), env: dict[str, str] | None = None
) -> Iterator[str]:
    """``rockroll serve-model MODEL_DIR --model-name NAME ARGS`` on 127.0.0.1; yields its root URL."""
    with model_server_proc(model_dir, name, args, env) as (url, _proc):
        yield url


@contextmanager
def model_server_proc(
    model_dir: Path, name: str = "tiny", args: tuple[str, ...] = (), env: dict[str, str] | None = None
) -> Iterator[tuple[str, subprocess.Popen]]:
    """:func:`model_server`, yielding the server process too."""
    import httpx

    port = free_port()
    env = {**os.environ, "OMP_NUM_THREADS": "1", **(env or {})}
    cmd = [ROCKROLL, "serve-model", str(model_dir), "--port", str(port), "--model-name", name, *args]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"serve-model exited: {proc.stdout.read().decode()[-2000:]}")  # type: ignore[union-attr]
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("serve-model did not come up in 120 s")
            time.sleep(0.3)
        yield url, proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
