"""Issue 13, item 2 inside one sandbox: agent code runs as its own uid, apart from the server and from other sessions.

Attacks, in a real sandbox of each backend (Docker, and a confined process sandbox: root, bwrap, the
``rockroll-sandbox`` user): an agent command (the sandbox's ``exec``, and SWE-v0's bash in an env
session hosted by the sandbox) tries to connect to, replace or plant beside the server's socket, to
write the server's own files (its plugin folder, where custom env code is imported from), to
signal the server or become its uid or root, and, from session B, to read, list and plant files in
session A's workspace. Before the fix every agent command ran as the server's uid, so each of these
worked. They skip without Docker or without root, bubblewrap and the user, and fail instead where
``ROCKROLL_REQUIRE_DOCKER=1`` says the set-up ran.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from rockroll.envs.agent_identity import AgentIdentity, argv_as, kill_uid
from rockroll.sandbox.base import SandboxSpec
from rockroll.sandbox.confine import SANDBOX_DIR, SANDBOX_USER
from rockroll.sandbox.process import ProcessBackend
from tests.sandbox.conftest import confinement_problem, docker_problem, server, skip_or_fail, state_dir  # noqa: F401

SOCKET = f"{SANDBOX_DIR}/s.sock"  # where the server's socket is, seen from inside either backend
#: what a command prints about its identity and capabilities
WHOAMI = "id -u; grep -E '^Cap(Prm|Eff|Bnd|Amb):' /proc/self/status | awk '{print $2}' | sort -u"
#: tries to connect to the server's socket and talk to it: prints what happened
CONNECT = (
    "import socket, sys\n"
    "s = socket.socket(socket.AF_UNIX)\n"
    "try:\n"
    f"    s.connect({SOCKET!r})\n"
    '    s.sendall(b\'POST /exec HTTP/1.1\\r\\nContent-Length: 15\\r\\n\\r\\n{"cmd": "true"}\')\n'
    "    print('CONNECTED', s.recv(100))\n"
    "except OSError as e:\n"
    "    print('REFUSED', type(e).__name__)\n"
)
#: the names of the processes of the caller's uid
MINE = 'for p in /proc/[0-9]*; do [ "$(stat -c %u $p 2>/dev/null)" = "$(id -u)" ] && cat $p/comm; done'
BECOME = (
    "import os\n"
    "for uid in map(int, os.sys.argv[1:]):\n"
    "    try:\n"
    "        os.setresuid(uid, uid, uid); print('BECAME', uid)\n"
    "    except PermissionError:\n"
    "        print('REFUSED', uid)\n"
)


@pytest.fixture(params=["docker", "process"])
def sandbox(request: Any, state_dir: str) -> Iterator[tuple[Any, Any, str]]:  # noqa: F811
    """``(backend, handle, server_dir)`` of a fresh sandbox; ``server_dir`` is the server's own folder inside."""
    spec = SandboxSpec(name="uid", memory_mb=512, pids_limit=256, cpus=1.0, max_sessions=4)
    if request.param == "docker":
        problem = docker_problem()
        if problem:
            skip_or_fail(f"no Docker daemon: {problem}")
        import rockroll.sandbox.docker_backend as docker_backend
        from rockroll.sandbox.images import build_image

        backend: Any = docker_backend.DockerBackend(state_dir=state_dir)
        spec = spec.model_copy(update={"image": build_image()})
        server_dir = getattr(docker_backend, "SERVER_DIR", "/srv/rockroll")
    else:
        problem = confinement_problem()
        if problem:
            skip_or_fail(f"process confinement: {problem}")
        backend = ProcessBackend(state_dir=state_dir, user=SANDBOX_USER)
        server_dir = f"{SANDBOX_DIR}/srv"
    sid = f"uid{uuid.uuid4().hex[:6]}"
    handle = backend.start(sid, spec, labels={"rockroll.manager": f"m{sid}", "rockroll.sandbox": sid})
    try:
        backend.wait_ready(handle, 120)
        yield backend, handle, server_dir
    finally:
        backend.stop(handle)


def _health(backend: Any, handle: Any) -> dict[str, Any]:
    client = backend.client(handle, timeout_s=60.0)
    try:
        return dict(client.call("health"))
    finally:
        client.close()


def test_exec_runs_as_an_agent_uid_that_cannot_touch_the_server(sandbox: tuple[Any, Any, str]) -> None:
    backend, h, server_dir = sandbox
    health = _health(backend, h)
    # the server's socket: no connection (which would run commands as the server), no replacement,
    # nothing planted beside it
    r = backend.exec(h, ["python3", "-c", CONNECT])
    assert r.stdout.startswith("REFUSED"), r
    for attack in (f"rm -f {SOCKET}", f"mv {SOCKET} {SOCKET}.old", f"touch {SANDBOX_DIR}/planted", f"ls {SANDBOX_DIR}"):
        r = backend.exec(h, attack)
        assert r.exit_code != 0, (attack, r)
    # the server's own files (custom env plugins are imported from there) and its log
    for attack in (
        f"mkdir -p {server_dir}/.rockroll/plugins/evil && echo x > {server_dir}/.rockroll/plugins/evil/manifest.json",
        f"ls {server_dir}/.rockroll",
        f"echo x > {server_dir}/planted",
        f"cat {SANDBOX_DIR}/server.log",
    ):
        r = backend.exec(h, attack)
        assert r.exit_code != 0, (attack, r)
    # the server's process: no signal, no uid of its own or root's
    r = backend.exec(h, f"kill -STOP {health['pid']}")
    assert r.exit_code != 0, r
    server_uid = int(health.get("server_uid", backend.exec(h, "id -u").stdout))
    r = backend.exec(h, ["python3", "-c", BECOME, str(server_uid), "0"])
    assert r.stdout.split() == ["REFUSED", str(server_uid), "REFUSED", "0"], r

    # who the agent is: its own uid, no capability in any set, and the server says so
    assert health.get("agent_isolation") == "uid" and h.extra.get("agent_isolation") == "uid", health
    agent_uid = health["agent_uid"]
    assert agent_uid not in (0, server_uid), health
    r = backend.exec(h, WHOAMI)
    assert r.exit_code == 0, r
    uid, *caps = r.stdout.split()
    assert int(uid) == agent_uid and caps == ["0000000000000000"], r.stdout

    # the workspace is the agent's, and the file calls act as it: what it writes the API reads
    assert backend.exec(h, "echo mine > note && ls -ln note").stdout.split()[2] == str(agent_uid)
    assert backend.read_file(h, "note") == b"mine\n"
    backend.write_file(h, "from-api", b"x")
    assert backend.exec(h, "stat -c %u from-api").stdout.strip() == str(agent_uid)
    assert backend.exec(h, ["true"]).exit_code == 0  # the server lives on, its socket intact


def _bash(client: Any, sid: str, cmd: str) -> str:
    """The output of ``cmd`` in session ``sid`` (the observation less its echo of the command)."""
    obs = str(client.call("env.step", session_id=sid, action=f"<answer>bash: {cmd}</answer>")[0])
    return obs.split("\n", 1)[1] if obs.startswith("$ ") else obs


def test_one_session_cannot_read_or_plant_in_another_sessions_workspace(sandbox: tuple[Any, Any, str]) -> None:
    backend, h, _ = sandbox
    server_uid = int(_health(backend, h).get("server_uid", backend.exec(h, "id -u").stdout))
    client = backend.client(h, timeout_s=120.0)
    try:
        a, b = (client.call("env.make", env_id="SWE-v0")["session_id"] for _ in range(2))
        for sid in (a, b):
            client.call("env.reset", session_id=sid, seed=0)
        out_a = _bash(client, a, "id -u; pwd; echo s3cret > secret.txt; ls secret.txt")
        uid_a, home_a = re.search(r"(\d+)\n(/\S+)\n", out_a).groups()  # type: ignore[union-attr]
        assert "secret.txt" in out_a, out_a
        out_b = _bash(client, b, "id -u; pwd")
        uid_b, home_b = re.search(r"(\d+)\n(/\S+)\n", out_b).groups()  # type: ignore[union-attr]

        # session B reads, lists, plants in and replaces files of session A's workspace
        out = _bash(client, b, f"cat {home_a}/secret.txt; ls {home_a} ../; echo evil > {home_a}/planted; echo done")
        assert "s3cret" not in out and out.count("Permission denied") == 3, out
        out = _bash(client, b, f"rm -rf {home_a}; mv {home_a} /tmp/gone; echo done")
        out_a = _bash(client, a, "cat secret.txt; ls")
        assert "s3cret" in out_a and "planted" not in out_a, out_a
        # each session is a uid of its own, neither the server's nor root
        assert uid_a != uid_b and not {int(uid_a), int(uid_b)} & {server_uid, 0}, (out_a, out_b)
        assert home_a != home_b
        # and it cannot reach the server's socket either
        out = _bash(client, b, f"test -w {SOCKET} && echo WRITABLE || echo REFUSED")
        assert "REFUSED" in out and "WRITABLE" not in out, out

        # a closed session's uid and folder come back empty, its processes gone
        _bash(client, a, "(setsid sleep 600 >/dev/null 2>&1 &) ; echo started")
        client.call("env.close", session_id=a)
        c = client.call("env.make", env_id="SWE-v0")["session_id"]
        client.call("env.reset", session_id=c, seed=0)
        out_c = _bash(client, c, f"id -u; ls ..; {MINE}")
        assert "secret.txt" not in out_c and "sleep" not in out_c, out_c
    finally:
        client.close()


def test_identities_are_never_root_and_a_server_without_the_capabilities_says_so(server: Any) -> None:  # noqa: F811
    for uid, gid in ((0, 5), (5, 0), (-1, 5)):
        with pytest.raises(ValueError):
            AgentIdentity(uid, gid, "/tmp")
    with pytest.raises(ValueError):
        kill_uid(0)
    argv = argv_as(AgentIdentity(10002, 10002, "/w"), ["id"], cwd="/w")
    assert argv[0].startswith("/") and "--ambient-caps=-all" in argv and "--bounding-set=-all" in argv
    assert "--no-new-privs" in argv and argv[-1] == "id"
    # a server in a thread of this process is given no agent uids: it says its commands run as itself
    health = server.call("health")
    assert health["agent_isolation"] == "none" and health["agent_uid"] == health["server_uid"]
