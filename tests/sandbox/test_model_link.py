"""The model link (rockroll.sandbox.model_link): an agent program reaches the model service through a Unix
socket and the forwarder on its own loopback, on the host and from inside a confined process sandbox (its
own net namespace: the service's TCP port is out of its reach, the link is not). Real service, real HF
engine, real sockets; each call lands in the episode its key names."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("openai")

from rockroll.sandbox.model_link import HostRelay, link_socket  # noqa: E402
from tests.agentrl.model_server import recorded_service  # noqa: E402
from tests.sandbox.conftest import confinement_problem, skip_or_fail  # noqa: E402

#: the agent: two chat calls through OPENAI_BASE_URL / OPENAI_API_KEY (the ``openai`` client reads both), then
#: a try at the service's own TCP port (argv[1]), which only an unconfined process reaches
AGENT = r"""
import socket, sys
import openai
client = openai.OpenAI(max_retries=0, timeout=60)
for text in ("hello", "again"):
    out = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": text}], max_tokens=4)
    print("answer:", out.choices[0].finish_reason)
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5).close()
    print("direct: reached")
except OSError as e:
    print("direct: refused", type(e).__name__)
"""


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Any, int]]:
    import torch

    from rockroll.agentrl.models.tiny import TinyModelConfig, build_tiny_model

    torch.set_num_threads(1)
    path = build_tiny_model(tmp_path_factory.mktemp("link") / "model", TinyModelConfig(episodes_per_env=3))
    with recorded_service(path) as served:
        yield served


def _link_argv(sock: str, *cmd: str) -> list[str]:
    return [sys.executable, "-m", "rockroll.sandbox.model_link", "--socket", sock, "--", *cmd]


def test_an_agent_on_the_host_reaches_the_service_through_the_link(service: tuple[str, Any, int]) -> None:
    _url, recorder, port = service
    key = recorder.open("ep-host")
    with tempfile.TemporaryDirectory(prefix="rr-link-") as d, HostRelay(Path(d) / "m.sock", ("127.0.0.1", port)):
        env = {**os.environ, "OPENAI_API_KEY": key}
        out = subprocess.run(
            _link_argv(f"{d}/m.sock", sys.executable, "-c", AGENT, str(port)), env=env, capture_output=True,
            text=True, timeout=120,
        )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.count("answer:") == 2
    assert len(recorder.close("ep-host").calls) == 2


def test_the_link_passes_the_commands_status_and_says_when_no_relay_is_up(tmp_path: Path) -> None:
    sock = tmp_path / "m.sock"
    with HostRelay(sock, ("127.0.0.1", 9)):
        assert (
            subprocess.run(_link_argv(str(sock), sys.executable, "-c", "raise SystemExit(3)"), timeout=60).returncode
            == 3
        )
    assert not sock.exists()  # the relay took its socket away
    out = subprocess.run(_link_argv(str(sock), "true"), capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "no socket at" in out.stderr


#: the agent inside a sandbox (an image may lack the ``openai`` package): the same calls with the standard library
STDLIB_AGENT = r"""
import json, os, socket, sys, urllib.request
for text in ("hello", "again"):
    body = {"model": "tiny", "messages": [{"role": "user", "content": text}], "max_tokens": 4}
    req = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", json.dumps(body).encode(),
        {"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"], "Content-Type": "application/json"})
    print("answer:", json.load(urllib.request.urlopen(req, timeout=60))["choices"][0]["finish_reason"])
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5).close()
    print("direct: reached")
except OSError as e:
    print("direct: refused", type(e).__name__)
"""


def _sandbox(kind: str, state: Path) -> tuple[Any, str]:
    """A backend of ``kind`` and its sandboxes' interpreter."""
    from rockroll.sandbox.confine import SANDBOX_USER

    if kind == "process":
        from rockroll.sandbox.process import ProcessBackend

        problem = confinement_problem()
        if problem:
            skip_or_fail(problem)
        backend = ProcessBackend(state_dir=str(state / "sb"), user=SANDBOX_USER)
        return backend, backend.python
    from rockroll.sandbox.docker_backend import DockerBackend
    from tests.sandbox.conftest import docker_problem

    problem = docker_problem()
    if problem:
        skip_or_fail(problem)
    return DockerBackend(state_dir=str(state / "sb")), "python3"  # the image's server runs so


@pytest.mark.parametrize("kind", ["process", pytest.param("docker", marks=pytest.mark.docker)])
def test_a_sandbox_reaches_the_service_only_through_the_link(kind: str, service: tuple[str, Any, int]) -> None:
    from rockroll.sandbox.base import SandboxSpec

    _url, recorder, port = service
    state = Path(tempfile.mkdtemp(prefix="rr-ml-"))  # short: socket paths must fit in 107 bytes
    backend, python = _sandbox(kind, state)
    labels = {"rockroll.manager": f"ml{uuid.uuid4().hex[:6]}"}
    handle = backend.start("ml0", SandboxSpec(name="link"), labels=labels)
    try:
        backend.wait_ready(handle, 120)
        key = recorder.open(f"ep-{kind}")
        host_sock, inner_sock = link_socket(handle)
        with HostRelay(host_sock, ("127.0.0.1", port)):
            argv = [python, "-m", "rockroll.sandbox.model_link", "--socket", inner_sock, "--"]
            res = backend.exec(
                handle, [*argv, python, "-c", STDLIB_AGENT, str(port)], env={"OPENAI_API_KEY": key}, timeout_s=120
            )
        assert res.exit_code == 0, (res.stdout, res.stderr)
        assert res.stdout.count("answer:") == 2, res.stdout
        assert "direct: refused" in res.stdout  # no network of its own: the service's port is not there
        assert len(recorder.close(f"ep-{kind}").calls) == 2
    finally:
        backend.stop(handle)
        shutil.rmtree(state, ignore_errors=True)
