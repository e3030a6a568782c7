"""A Docker start that fails after the daemon created the container leaves nothing behind.

Attack: a caller asks for a sandbox whose spec the daemon accepts at create but the runtime
rejects at start (an environment value with a NUL byte: ``containers/create`` takes it, runc
refuses it when ``containers/<id>/start`` runs the container's init). Each such request used to
leave a container in state "Created" behind, so a caller could fill the host with them. Now
the start raises :class:`SandboxStartError` with the daemon's message, and no container, no
socket directory and no count in the backend's per-host load remain. The same holds when the
image disappears between the backend's image check and the create (:class:`ImageNotFound`).

Real Docker daemon and ``rockroll-sandbox:latest`` (no container ever runs, so any build of the
image will do); skipped without them unless ``ROCKROLL_REQUIRE_DOCKER=1``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from rockroll.sandbox.base import DEFAULT_IMAGE, SandboxSpec
from rockroll.sandbox.docker_backend import LOCAL, DockerBackend
from rockroll.sandbox.errors import BackendUnavailable, ImageNotFound, SandboxStartError
from tests.sandbox.conftest import REQUIRE_DOCKER, state_dir  # noqa: F401

pytestmark = pytest.mark.docker


@pytest.fixture
def manager() -> str:
    """The ``rockroll.manager`` label of this test's containers."""
    return f"t{uuid.uuid4().hex[:8]}"


@pytest.fixture
def backend(state_dir: str, manager: str) -> Iterator[DockerBackend]:  # noqa: F811
    """A Docker backend on the local daemon; removes the test's containers afterwards."""
    try:
        b = DockerBackend(state_dir=state_dir)
        problem = None if b.has_image(DEFAULT_IMAGE) else f"image {DEFAULT_IMAGE} is not built"
    except BackendUnavailable as e:
        problem = str(e)
    if problem:
        if REQUIRE_DOCKER:
            pytest.fail(f"ROCKROLL_REQUIRE_DOCKER=1 but Docker is unusable: {problem}")
        pytest.skip(f"needs a Docker daemon and `rockroll image build`: {problem}")
    yield b
    for c in docker.from_env().containers.list(all=True, filters={"label": [f"rockroll.manager={manager}"]}):
        c.remove(force=True)


def _labels(manager: str, sandbox_id: str) -> dict[str, str]:
    return {
        "rockroll.managed": "1",
        "rockroll.manager": manager,
        "rockroll.sandbox": sandbox_id,
        "rockroll.generation": "0",
        "rockroll.pool": "default",
    }


def _leftovers(manager: str, sandbox_id: str) -> list[str]:
    """``docker ps -a`` for this sandbox, by its labels and by its container name."""
    client = docker.from_env()
    by_label = client.containers.list(all=True, filters={"label": [f"rockroll.sandbox={sandbox_id}"]})
    by_name = client.containers.list(all=True, filters={"name": f"rockroll-{manager}-{sandbox_id}-g0"})
    return [f"{c.name} ({c.status})" for c in by_label + by_name]


def test_start_rejected_after_create_leaves_no_container(backend: DockerBackend, manager: str) -> None:
    sandbox_id = f"sb-{uuid.uuid4().hex[:12]}"
    spec = SandboxSpec(env=(("ROCKROLL_PROBE", "a\x00b"),))
    load = backend._load[LOCAL]
    with pytest.raises(SandboxStartError) as err:
        backend.start(sandbox_id, spec, labels=_labels(manager, sandbox_id))
    assert err.value.sandbox_id == sandbox_id
    assert "/start" in str(err.value), f"the daemon must have refused the start, not the create: {err.value}"
    assert _leftovers(manager, sandbox_id) == []
    assert not (Path(backend.state_dir) / manager / f"{sandbox_id}-g0").exists()
    assert backend._load[LOCAL] == load


def test_image_gone_before_create_leaves_nothing(backend: DockerBackend, manager: str) -> None:
    sandbox_id = f"sb-{uuid.uuid4().hex[:12]}"
    client = docker.from_env()
    gone = f"rockroll-test-gone-{uuid.uuid4().hex[:8]}:latest"
    client.images.get(DEFAULT_IMAGE).tag(gone)
    assert backend.has_image(gone)  # the backend now remembers the image ...
    client.images.remove(gone)  # ... which goes away before the start (only the tag: no layer is removed)
    load = backend._load[LOCAL]
    with pytest.raises(ImageNotFound):
        backend.start(sandbox_id, SandboxSpec(image=gone), labels=_labels(manager, sandbox_id))
    assert _leftovers(manager, sandbox_id) == []
    assert not (Path(backend.state_dir) / manager / f"{sandbox_id}-g0").exists()
    assert backend._load[LOCAL] == load
    assert not backend.has_image(gone)
