"""Fixtures for sandbox tests: managers on both backends, with leak checks after each test.

Docker tests are marked ``docker``. They skip when no daemon answers, unless
``ROCKROLL_REQUIRE_DOCKER=1`` (exported by scripts/test.sh after scripts/setup-docker.sh), in
which case they fail: CI must not silently skip them.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from rockroll.sandbox.client import SandboxClient
from rockroll.sandbox.manager import SandboxManager
from rockroll.sandbox.server.app import SandboxServer, make_httpd

REQUIRE_DOCKER = os.environ.get("ROCKROLL_REQUIRE_DOCKER") == "1"


def skip_or_fail(problem: str) -> None:
    """Skip a test that cannot run here, or fail it where CI requires it (``ROCKROLL_REQUIRE_DOCKER=1``)."""
    if REQUIRE_DOCKER:
        pytest.fail(f"cannot be tested: {problem}")
    pytest.skip(problem)


def confinement_problem() -> str | None:
    """Why confined process sandboxes (root, bubblewrap, the sandbox user) cannot run here, or None."""
    from rockroll.sandbox.confine import SANDBOX_USER, sandbox_user
    from rockroll.sandbox.isolation import detect_isolation

    if os.geteuid() != 0:
        return "not root"
    if detect_isolation() != "bwrap":
        return "no bubblewrap"
    if sandbox_user() is None:
        return f"no user {SANDBOX_USER}"
    return None


def docker_problem() -> str | None:
    """Why Docker tests cannot run here, or None."""
    from rockroll.sandbox.docker_backend import DockerBackend
    from rockroll.sandbox.errors import BackendUnavailable

    try:
        DockerBackend()
    except BackendUnavailable as e:
        return str(e)
    return None


@pytest.fixture(scope="session")
def docker_image() -> str:
    """The sandbox image, built (offline path) if missing or stale."""
    problem = docker_problem()
    if problem:
        if REQUIRE_DOCKER:
            pytest.fail(f"ROCKROLL_REQUIRE_DOCKER=1 but Docker is unusable: {problem}")
        pytest.skip(f"no Docker daemon: {problem}")
    from rockroll.sandbox.images import build_image

    return build_image()


@pytest.fixture
def state_dir() -> Iterator[str]:
    """A short host directory for sockets (unix socket paths are limited to 108 bytes)."""
    d = tempfile.mkdtemp(prefix="rr-", dir="/tmp")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def leftovers(m: SandboxManager) -> list[str]:
    """Containers or processes of ``m`` still running."""
    return [h.ref for h in m.backend.list_managed(m.config.name)]


@pytest.fixture
def make_manager(tmp_path: Any, state_dir: str) -> Iterator[Callable[..., SandboxManager]]:
    """Build managers (unique name, SQLite in tmp_path); close them and check nothing leaked."""
    made: list[SandboxManager] = []

    def factory(backend: str = "process", **overrides: Any) -> SandboxManager:
        overrides.setdefault("name", f"t{uuid.uuid4().hex[:8]}")
        overrides.setdefault("db_url", f"sqlite:///{tmp_path}/sandboxes.db")
        overrides.setdefault("monitor_interval_s", 0.1)
        m = SandboxManager(backend=backend, state_dir=state_dir, **overrides)
        made.append(m)
        return m

    yield factory
    for m in made:
        m.close()
    for m in made:
        assert leftovers(m) == [], f"manager {m.config.name} leaked sandboxes"


@pytest.fixture
def server(tmp_path: Any, state_dir: str) -> Iterator[SandboxClient]:
    """An in-sandbox server in a thread of this process, and a client for it."""
    state = SandboxServer(str(tmp_path / "ws"), max_sessions=4)
    sock = os.path.join(state_dir, "s.sock")
    httpd = make_httpd(sock, state)
    t = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    client = SandboxClient(sock, sandbox_id="test", timeout_s=30)
    yield client
    client.close()
    httpd.shutdown()
    httpd.server_close()
    state.sessions.close_all()


def trajectory(env: Any, seed: int, steps: int = 12) -> list[Any]:
    """Play ``env`` from ``seed`` cycling through its legal actions; JSON-normalised transitions."""
    out: list[Any] = [env.reset(seed=seed)]
    for i in range(steps):
        cands = env.action_candidates()
        step = env.step(f"<answer>{cands[i % len(cands)]}</answer>")
        out.append(step)
        if step[2] or step[3]:
            break
    out.append(env.get_state())
    return json.loads(json.dumps(out))
