"""A real ``rockroll serve-model`` subprocess on a free loopback port (for the serve and eval tests)."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from rockroll.api.server.serve_proc import serve_model_proc

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


def model_server_proc(
    model_dir: Path, name: str = "tiny", args: tuple[str, ...] = (), env: dict[str, str] | None = None
) -> AbstractContextManager[tuple[str, subprocess.Popen]]:
    """:func:`model_server`, yielding the server process too."""
    return serve_model_proc(model_dir, name, args, env)
