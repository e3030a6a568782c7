"""A real ``rockroll serve-model`` subprocess on a free loopback port (for the serve and eval tests)."""

from __future__ import annotations

import os
import queue
import re
import socket
import subprocess
import sys
import threading
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

    env = {**os.environ, "OMP_NUM_THREADS": "1", **(env or {})}
    cmd = [ROCKROLL, "serve-model", str(model_dir), "--port", "0", "--model-name", name, *args]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: queue.Queue[str] = queue.Queue()
    out = proc.stdout
    assert out is not None
    threading.Thread(target=lambda: [lines.put(line) for line in out], daemon=True).start()
    seen: list[str] = []
    url = ""
    deadline = time.monotonic() + 120
    try:
        while not url:  # --port 0: the server names the port it bound
            if time.monotonic() > deadline:
                raise RuntimeError(f"serve-model named no port in 120 s: {''.join(seen)[-2000:]}")
            try:
                seen.append(lines.get(timeout=0.5))
            except queue.Empty:
                if proc.poll() is not None:
                    raise RuntimeError(f"serve-model exited: {''.join(seen)[-2000:]}") from None
                continue
            found = re.search(r"serving .* on (http://127\.0\.0\.1:(\d+))/v1", seen[-1])
            if found:
                assert found.group(2) != "0", seen[-1]
                url = found.group(1)
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"serve-model exited: {''.join(seen)[-2000:]}")
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
