"""The Docker backend against a real daemon: parity, fork, crash recovery, reconciliation, config."""

from __future__ import annotations

from typing import Any

import docker
import pytest

import rockroll.envhub as envhub
from rockroll.sandbox.base import SandboxSpec
from rockroll.sandbox.docker_backend import SERVER_CAPS, SERVER_DIR
from rockroll.sandbox.errors import ImageNotFound, SandboxLost
from tests.sandbox.conftest import leftovers, trajectory

pytestmark = pytest.mark.docker


@pytest.fixture
def dm(make_manager: Any, docker_image: str) -> Any:
    """A Docker-backed manager with a fast monitor."""
    return make_manager(backend="docker", default_spec=SandboxSpec(image=docker_image))


def test_docker_session_plays_frozenlake_and_sokoban_like_in_process(dm: Any) -> None:
    for env_id in ("FrozenLake-v0", "Sokoban-v0"):
        with dm.open_session(env_id) as remote:
            local = envhub.make(env_id)
            assert remote.system_prompt() == local.system_prompt()
            assert trajectory(remote, 4) == trajectory(local, 4)
    assert len(dm.list()) == 1  # both sessions went to the same sandbox


def test_docker_fork_continues_independently(dm: Any) -> None:
    s = dm.open_session("Sokoban-v0")
    s.reset(seed=9)
    f = s.fork()
    local = envhub.make("Sokoban-v0")
    local.set_state(f.get_state())
    moves = ["<answer>Up</answer>", "<answer>Left</answer>", "<answer>Down</answer>"]
    assert [f.step(a) for a in moves] == [local.step(a) for a in moves]
    assert s.get_state() != f.get_state()


def test_container_is_locked_down(dm: Any, docker_image: str) -> None:
    sb = dm.create()
    attrs = docker.from_env().containers.get(sb.handle.ref).attrs
    hc, cfg = attrs["HostConfig"], attrs["Config"]
    # the server is the container's root with only the capabilities to run agent code as other uids
    assert cfg["User"] == "0:0"
    assert hc["NetworkMode"] == "none" and hc["ReadonlyRootfs"] is True
    assert hc["CapDrop"] == ["ALL"] and "no-new-privileges" in hc["SecurityOpt"]
    assert {c.removeprefix("CAP_") for c in hc["CapAdd"]} == set(SERVER_CAPS)
    assert hc["PidsLimit"] == 256 and hc["Memory"] == 512 * 2**20 and hc["NanoCpus"] == 10**9
    assert set(hc["Tmpfs"]) == {"/workspace", "/tmp", SERVER_DIR}
    assert cfg["Labels"]["rockroll.managed"] == "1" and cfg["Labels"]["rockroll.sandbox"] == sb.id
    r = sb.exec("id -u")
    assert int(r.stdout) == sb.handle.extra["agent_uid"] >= 10001  # the sandbox's exec calls run as its agent uid


def test_docker_kill_is_noticed_and_replaced(dm: Any) -> None:
    s = dm.open_session("FrozenLake-v0")
    s.reset(seed=0)
    sb = s.sandbox
    old = sb.handle.ref
    docker.from_env().containers.get(old).kill()
    assert dm.wait_until(lambda: sb.state == "ready" and sb.generation == 1, 30)
    with pytest.raises(SandboxLost):
        s.step("<answer>Up</answer>")
    assert leftovers(dm) == [sb.handle.ref] and sb.handle.ref != old
    with dm.open_session("FrozenLake-v0") as s2:
        assert s2.reset(seed=0)[0]


def test_docker_manager_restart_adopts_and_removes(make_manager: Any, docker_image: str) -> None:
    spec = SandboxSpec(image=docker_image)
    m1 = make_manager(backend="docker", default_spec=spec)
    kept, lost = m1.create(), m1.create()
    m1.close(stop_sandboxes=False)
    client = docker.from_env()
    client.containers.get(lost.handle.ref).kill()
    orphan = m1.backend.start(
        "sb-orphan",
        spec,
        labels={"rockroll.managed": "1", "rockroll.manager": m1.config.name, "rockroll.sandbox": "sb-orphan"},
    )
    m2 = make_manager(backend="docker", name=m1.config.name, db_url=m1.config.db_url, default_spec=spec)
    report = m2.reconcile_report
    assert report["adopted"] == [kept.id] and report["restarted"] == [lost.id]
    assert sorted(report["removed"]) == sorted(["sb-orphan", lost.id])  # the orphan and the dead container
    assert m2.wait_until(lambda: all(sb.state == "ready" for sb in m2.list()), 30)
    assert m2.get(kept.id).handle.ref == kept.handle.ref
    assert sorted(leftovers(m2)) == sorted(sb.handle.ref for sb in m2.list())
    assert orphan.ref not in leftovers(m2)
    # the adopted sandbox is watched: kill it, it comes back
    client.containers.get(kept.handle.ref).kill()
    assert m2.wait_until(lambda: m2.get(kept.id).generation == kept.generation + 1, 30)


def test_unknown_image_is_a_typed_error(make_manager: Any, docker_image: str) -> None:
    m = make_manager(backend="docker", default_spec=SandboxSpec(image=docker_image))
    with pytest.raises(ImageNotFound) as e:
        m.create(SandboxSpec(image="rockroll-no-such-image:nope"))
    assert e.value.image == "rockroll-no-such-image:nope"
    assert m.list() == [] and leftovers(m) == []


def test_bad_input_through_a_docker_sandbox(dm: Any) -> None:
    from rockroll.envhub.errors import UnknownEnvError
    from rockroll.sandbox.errors import SandboxPathError

    sb = dm.create()
    with pytest.raises(UnknownEnvError):
        dm.open_session("NoSuchEnv-v0")
    r = sb.exec(["sleep", "30"], timeout_s=0.5)
    assert r.timed_out and r.exit_code == 137 and r.duration_s < 5
    r = sb.exec("yes | head -c 3000000", max_output=1000)
    assert r.truncated and len(r.stdout) == 1000
    for path in ("../x", "/etc/passwd", "a\x00b"):
        with pytest.raises(SandboxPathError):
            sb.read_file(path)
    assert sb.state == "ready" and sb.sessions == 0


def test_sandboxes_spread_over_listed_docker_hosts(make_manager: Any, docker_image: str) -> None:
    # two URLs of the same local daemon stand in for two hosts
    hosts = ("unix:///var/run/docker.sock", "unix://var/run/docker.sock")
    m = make_manager(backend="docker", docker_hosts=hosts, default_spec=SandboxSpec(image=docker_image))
    a, b = m.create(), m.create()
    assert {a.handle.host, b.handle.host} == set(hosts)
    assert a.exec("echo a").stdout == "a\n" and b.exec("echo b").stdout == "b\n"
