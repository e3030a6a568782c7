"""A real ``rockroll serve-model`` subprocess on a free loopback port (for the serve and eval tests)."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

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


@contextmanager
def recorded_service(model_dir: Path, max_calls: int = 8) -> Iterator[tuple[str, Any, int]]:
    """The model service of agent episodes in this process: an HF engine on ``model_dir`` behind a real
    uvicorn server on a free loopback port, with a :class:`CallRecorder`; yields ``(v1 url, recorder, port)``."""
    import threading

    import uvicorn

    from rockroll.agentrl.engines.hf import HFEngine
    from rockroll.agentrl.models.tiny import load_model_and_tokenizer
    from rockroll.agentrl.serving.app import create_app
    from rockroll.agentrl.serving.recording import CallRecorder
    from rockroll.sandbox.retry import wait_until

    model, tok = load_model_and_tokenizer(model_dir)
    engine = HFEngine(model=model, tokenizer=tok, max_batch_size=8, seed=0, num_threads=1)
    recorder = CallRecorder(max_calls=max_calls)
    app = create_app(engine, "tiny", default_max_tokens=8, max_model_len=2048, recorder=recorder)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = int(sock.getsockname()[1])
    server = uvicorn.Server(uvicorn.Config(app, log_config=None, lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        assert wait_until(lambda: server.started, 60), "uvicorn did not start"
        yield f"http://127.0.0.1:{port}/v1", recorder, port
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
