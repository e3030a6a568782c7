"""The in-sandbox server through its client: sessions, exec, files, health, bad input."""

from __future__ import annotations

import os

import pytest

import rockroll.envhub as envhub
from rockroll.envhub.errors import UnknownEnvError
from rockroll.envs.errors import EnvConfigError, ResetNeeded
from rockroll.sandbox.client import SandboxClient
from rockroll.sandbox.errors import CapacityError, RemoteError, SandboxLost, SandboxPathError, SessionNotFound


def test_health_reports_load(server: SandboxClient) -> None:
    h = server.call("health")
    assert h["sessions"] == 0 and h["max_sessions"] == 4
    assert h["memory_bytes"] > 0 and h["pid"] == os.getpid() and len(h["boot_id"]) == 16
    server.call("env.make", env_id="FrozenLake-v0")
    assert server.call("health")["sessions"] == 1


def test_session_matches_local_env(server: SandboxClient) -> None:
    sid = server.call("env.make", env_id="FrozenLake-v0")["session_id"]
    local = envhub.make("FrozenLake-v0")
    assert server.call("env.reset", session_id=sid, seed=7) == list(local.reset(seed=7))
    for action in ("<answer>Down</answer>", "<answer>Right</answer>", "nonsense"):
        assert server.call("env.step", session_id=sid, action=action) == list(local.step(action))


def test_env_errors_keep_their_types(server: SandboxClient) -> None:
    with pytest.raises(UnknownEnvError, match="Did you mean"):
        server.call("env.make", env_id="FrozenLak-v0")
    with pytest.raises(EnvConfigError):
        server.call("env.make", env_id="FrozenLake-v0", kwargs={"no_such_arg": 1})
    sid = server.call("env.make", env_id="FrozenLake-v0")["session_id"]
    with pytest.raises(ResetNeeded):
        server.call("env.step", session_id=sid, action="<answer>Up</answer>")
    with pytest.raises(SessionNotFound):
        server.call("env.step", session_id="nope", action="x")
    with pytest.raises(RemoteError, match="UnknownOp"):
        server.call("no.such.op")
    with pytest.raises(RemoteError, match="BadRequest"):
        server.call("env.make", wrong_arg=1)


def test_session_limit_is_a_capacity_error(server: SandboxClient) -> None:
    for _ in range(4):
        server.call("env.make", env_id="FrozenLake-v0")
    with pytest.raises(CapacityError) as e:
        server.call("env.make", env_id="FrozenLake-v0")
    assert e.value.limit == 4 and e.value.active == 4


def test_fork_continues_independently(server: SandboxClient) -> None:
    sid = server.call("env.make", env_id="FrozenLake-v0")["session_id"]
    server.call("env.reset", session_id=sid, seed=3)
    fork = server.call("env.fork", session_id=sid)["session_id"]
    assert server.call("env.get_state", session_id=fork) == server.call("env.get_state", session_id=sid)
    a = server.call("env.step", session_id=sid, action="<answer>Right</answer>")
    b = server.call("env.step", session_id=fork, action="<answer>Down</answer>")
    assert a[0] != b[0]
    server.call("env.close", session_id=sid)
    server.call("env.step", session_id=fork, action="<answer>Down</answer>")  # the fork lives on


def test_exec_argv_shell_cwd_env_stdin(server: SandboxClient) -> None:
    r = server.exec(["sh", "-c", 'echo "$FOO" $(pwd); echo oops >&2; exit 3'], env={"FOO": "bar"})
    assert (r.exit_code, r.stderr, r.timed_out, r.ok) == (3, "oops\n", False, False)
    assert r.stdout.startswith("bar ") and r.stdout.strip().endswith("ws")
    server.write_file("sub/x.txt", "hi")
    assert server.exec("cat x.txt", cwd="sub").stdout == "hi"
    assert server.exec(["cat"], stdin="piped").stdout == "piped"
    assert server.exec(["/no/such/binary"]).exit_code == 127


def test_exec_timeout_is_a_result(server: SandboxClient) -> None:
    r = server.exec("echo start; sleep 30", timeout_s=0.5)
    assert r.timed_out and not r.ok and r.stdout == "start\n" and r.duration_s < 5


def test_exec_huge_output_is_truncated(server: SandboxClient) -> None:
    r = server.exec("head -c 5000000 /dev/zero | tr '\\0' a", max_output=10_000)
    assert r.truncated and len(r.stdout) == 10_000 and r.exit_code == 0


def test_exec_bad_arguments(server: SandboxClient) -> None:
    with pytest.raises(ValueError):
        server.exec([])
    with pytest.raises(ValueError):
        server.exec("true", timeout_s=-1)
    with pytest.raises(SandboxPathError):
        server.exec("true", cwd="../..")


def test_files_round_trip_and_listing(server: SandboxClient) -> None:
    data = bytes(range(256)) * 10
    assert server.write_file("dir/blob.bin", data) == len(data)
    assert server.read_file("dir/blob.bin") == data
    assert server.list_files("dir") == [{"name": "blob.bin", "type": "file", "size": len(data)}]


@pytest.mark.parametrize("path", ["../escape.txt", "/etc/passwd", "a/../../x", "nul\x00byte", ""])
def test_files_refuse_invalid_paths(server: SandboxClient, path: str) -> None:
    with pytest.raises(SandboxPathError):
        server.write_file(path, "x")
    with pytest.raises(SandboxPathError):
        server.read_file(path)


def test_files_refuse_symlink_escapes(server: SandboxClient, tmp_path: object) -> None:
    server.exec("ln -s /etc etc_link && ln -s /etc/hostname host_file")
    with pytest.raises(SandboxPathError, match="outside"):
        server.read_file("etc_link/hostname")
    with pytest.raises(SandboxPathError, match="outside"):
        server.write_file("etc_link/evil", "x")
    with pytest.raises(SandboxPathError, match="outside"):
        server.read_file("host_file")
    with pytest.raises(SandboxPathError):
        server.read_file("missing.txt")


def test_client_without_server_raises_sandbox_lost(state_dir: str) -> None:
    client = SandboxClient(os.path.join(state_dir, "none.sock"), sandbox_id="x")
    with pytest.raises(SandboxLost):
        client.call("health")


def test_client_pinned_to_boot_id_detects_replacement(server: SandboxClient) -> None:
    pinned = SandboxClient(server.socket_path, sandbox_id="x", boot_id="0" * 16)
    with pytest.raises(SandboxLost, match="replaced"):
        pinned.call("health")
    pinned.close()
