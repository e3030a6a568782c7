"""The warm pool (rockroll.sandbox.warm): create() hands out started sandboxes, checked, and the pool refills.

The process-backend tests run everywhere; the ``docker`` ones use the real daemon and image
(isolation of warm containers, a dead idle container, the data-plane channel, a burst of 16).
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import docker
import pytest
from websockets.sync.client import unix_connect

from rockroll.envs.config import ConfigError
from rockroll.sandbox.base import SandboxSpec
from rockroll.sandbox.docker_backend import SERVER_CAPS, SERVER_DIR
from rockroll.sandbox.errors import SandboxError
from rockroll.sandbox.pool import WarmPoolConfig
from rockroll.sandbox.server.channel import BOOT_HEADER, CHANNEL_HEADER, channel_path
from rockroll.sandbox.warm import warm_key

MOVE = "<answer>Right</answer>"


def warm_manager(make_manager: Any, backend: str, size: int, check_s: float = 0.2, **spec: Any) -> Any:
    """A manager whose warm pool keeps ``size`` sandboxes of its default spec (probed every ``check_s``),
    once the pool is full."""
    m = make_manager(
        backend=backend,
        default_spec=SandboxSpec(**spec),
        max_sandboxes=32,
        warm_pool=WarmPoolConfig(size=size, check_interval_s=check_s),
    )
    assert m.wait_until(lambda: m.warm.idle() == size, 120), m.warm.stats()
    return m


def answers(m: Any, handle: Any) -> bool:
    try:
        m.backend.health(handle, timeout_s=1.0)
    except SandboxError:
        return False
    return True


def plays(sb: Any) -> None:
    """``sb`` serves a session: a FrozenLake reset and step."""
    with sb.open_session("FrozenLake-v0") as s:
        s.reset(seed=0)
        obs, reward, terminated, truncated, info = s.step(MOVE)
        assert isinstance(obs, str) and obs


def test_warm_key_ignores_the_pool_name_and_start_timeout_only() -> None:
    a = SandboxSpec(name="a", startup_timeout_s=5)
    assert warm_key(a) == warm_key(SandboxSpec(name="b")) and hash(warm_key(a)) == hash(warm_key(SandboxSpec()))
    assert warm_key(SandboxSpec(memory_mb=1024)) != warm_key(SandboxSpec())
    assert warm_key(SandboxSpec(env=(("A", "1"),))) != warm_key(SandboxSpec())
    with pytest.raises(ConfigError):
        WarmPoolConfig(size=-1)


def test_create_hands_out_a_warm_sandbox_that_serves_and_the_pool_refills(make_manager: Any) -> None:
    m = warm_manager(make_manager, "process", 1)
    (warm_id,) = [w.sandbox_id for q in m.warm._idle.values() for w in q]
    sb = m.create(SandboxSpec(name="other-pool"))  # another name, same sandbox: drawn from the same pool
    assert sb.id == warm_id and sb.pool == "other-pool" and sb.state == "ready" and m.get(sb.id) is sb
    assert m.warm.stats()["handed_out"] == 1
    assert m.wait_until(lambda: sb.id in {r.id for r in m.store.list()}, 10)  # recorded: a restarted manager adopts it
    plays(sb)
    assert m.wait_until(lambda: m.warm.idle() == 1, 60)  # refilled in the background
    assert m.create().id != sb.id


def test_a_warm_sandbox_that_died_while_idle_is_not_handed_out(make_manager: Any) -> None:
    m = warm_manager(make_manager, "process", 1, check_s=600)  # the hand-out check finds it, not a probe
    (dead,) = [w for q in m.warm._idle.values() for w in q]
    m.backend.stop(dead.handle)  # behind the pool's back: it is still in the pool, dead
    assert not answers(m, dead.handle) and m.warm.idle() == 1
    sb = m.create()
    assert sb.id != dead.sandbox_id
    assert m.warm.stats()["dead"] == 1
    plays(sb)


def test_without_a_warm_pool_create_starts_a_sandbox(make_manager: Any) -> None:
    m = make_manager(backend="process")
    assert not m.warm.enabled
    plays(m.create())
    assert m.warm.stats() == {"idle": 0, "starting": 0, "started": 0, "handed_out": 0, "dead": 0, "failed": 0}


# ---------------------------------------------------------------- Docker


@pytest.mark.docker
def test_docker_warm_hand_out_serves_over_http_and_the_channel_and_refills(
    make_manager: Any, docker_image: str
) -> None:
    m = warm_manager(make_manager, "docker", 2, image=docker_image)
    t0 = time.perf_counter()
    sb = m.create()
    took = time.perf_counter() - t0
    assert m.warm.stats()["handed_out"] == 1 and took < 5.0  # a check and a record, no container start
    plays(sb)
    # the image carries websockets: the Docker sandbox has the data-plane channel, like a process one
    with sb.open_session("FrozenLake-v0") as s:
        s.reset(seed=0)
        with unix_connect(channel_path(sb.handle.socket_path), uri="ws://sandbox/") as ws:
            assert ws.response.headers[CHANNEL_HEADER] == "frames"
            assert ws.response.headers[BOOT_HEADER] == sb.handle.boot_id
            ws.send(json.dumps([[1, "env.step", {"session_id": s.session_id, "action": MOVE}]]))
            ((cid, answer),) = json.loads(ws.recv(timeout=30))
            assert cid == 1 and isinstance(answer["result"][0], str)
    assert m.wait_until(lambda: m.warm.idle() == 2, 120)


@pytest.mark.docker
def test_docker_warm_containers_keep_the_isolation(make_manager: Any, docker_image: str) -> None:
    m = warm_manager(make_manager, "docker", 2, image=docker_image)
    a, b = m.create(), m.create()
    assert m.warm.stats()["handed_out"] == 2
    for sb in (a, b):
        attrs = docker.from_env().containers.get(sb.handle.ref).attrs
        hc, cfg = attrs["HostConfig"], attrs["Config"]
        assert cfg["User"] == "0:0" and hc["NetworkMode"] == "none" and hc["ReadonlyRootfs"] is True
        assert hc["CapDrop"] == ["ALL"] and "no-new-privileges" in hc["SecurityOpt"]
        assert {c.removeprefix("CAP_") for c in hc["CapAdd"]} == set(SERVER_CAPS)
        assert set(hc["Tmpfs"]) == {"/workspace", "/tmp", SERVER_DIR}
        assert cfg["Labels"]["rockroll.sandbox"] == sb.id and cfg["Labels"]["rockroll.manager"] == m.config.name
        assert int(sb.exec("id -u").stdout) == sb.handle.extra["agent_uid"] >= 10001
        assert sb.exec("touch /usr/x").exit_code != 0  # read-only root
        assert sb.exec("ls /sys/class/net").stdout.split() == ["lo"]  # no network but loopback
        assert sb.exec("grep CapEff /proc/self/status").stdout.split()[1] == "0000000000000000"
    assert a.handle.extra["agent_uid"] != b.handle.extra["agent_uid"]  # each sandbox its own uid


@pytest.mark.docker
def test_docker_dead_idle_warm_container_is_not_handed_out(make_manager: Any, docker_image: str) -> None:
    m = warm_manager(make_manager, "docker", 1, check_s=600, image=docker_image)
    (dead,) = [w for q in m.warm._idle.values() for w in q]
    docker.from_env().containers.get(dead.handle.ref).kill()
    sb = m.create()
    assert sb.id != dead.sandbox_id and m.warm.stats()["dead"] == 1
    plays(sb)


@pytest.mark.slow
@pytest.mark.docker
def test_docker_burst_of_16_creates_has_no_errors(make_manager: Any, docker_image: str) -> None:
    """8 from the warm pool, 8 started cold at once (16 threads on the Docker SDK together)."""
    m = warm_manager(make_manager, "docker", 8, image=docker_image)
    with ThreadPoolExecutor(16) as pool:
        futures = [pool.submit(m.create) for _ in range(16)]
        sandboxes = [f.result(timeout=300) for f in futures]
    assert len({sb.id for sb in sandboxes}) == 16 and all(sb.state == "ready" for sb in sandboxes)
    assert m.warm.stats()["handed_out"] >= 8 - m.warm.stats()["dead"]
    with ThreadPoolExecutor(16) as pool:
        assert all(r.exit_code == 0 for r in pool.map(lambda sb: sb.exec("true"), sandboxes))
