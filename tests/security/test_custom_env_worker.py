"""Issue 13, item 2 for env code: a custom env runs as its session's agent uid, apart from the server.

A hostile custom env (uploaded as a plugin, the way the control plane provisions one) attacks the
in-sandbox server when it is imported and again in ``step``: it connects to and tries to replace the
server's socket, plants files in the server's folder (where plugins are imported from), reads
another session's folder, becomes uid 0 or the server's uid, signals the server, and reports who
it is. In a real Docker sandbox and a real confined process sandbox it must run as a uid that is
neither root nor the server's, with no capability, and every attack must fail. Before this change
custom env code was imported into the server process itself, so every attack worked. A worker that
crashes or hangs loses its own session only (``SessionLost``, 410 ``sandbox_lost`` through the
API), and the server stays healthy. Skips (or fails under ``ROCKROLL_REQUIRE_DOCKER=1``) without
Docker, or without root, bubblewrap and the sandbox user.
"""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import pytest
from fastapi.testclient import TestClient

from rockroll.sandbox.base import SandboxSpec
from rockroll.sandbox.confine import SANDBOX_DIR
from rockroll.sandbox.errors import SandboxLost, SessionLost
from tests.api.conftest import data_dir, dev_client  # noqa: F401
from tests.sandbox.conftest import confinement_problem, state_dir  # noqa: F401
from tests.security.test_agent_uid import sandbox  # noqa: F401 - the Docker and process sandboxes

HOSTILE = b"""
import json, os, socket, struct, time
from typing import Any

import rockroll.envhub as envhub
from rockroll.envs.core import StepOutcome, TextEnv

SOCKET = "/run/rockroll/s.sock"


def _try(fn):
    try:
        fn()
        return "DONE"
    except Exception as e:  # noqa: BLE001
        return "REFUSED " + type(e).__name__


def _become(uid):
    pid = os.fork()
    if pid == 0:
        try:
            os.setresuid(uid, uid, uid)
            os._exit(0)
        except BaseException:
            os._exit(1)
    return "DONE" if os.waitpid(pid, 0)[1] == 0 else "REFUSED"


def _connect():
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(5)
    s.connect(SOCKET)
    s.sendall(b'POST /health HTTP/1.1\\r\\nContent-Length: 2\\r\\n\\r\\n{}')
    if not s.recv(100):
        raise OSError("nothing")


def _replace():
    os.rename(SOCKET, SOCKET + ".old")
    os.rename(SOCKET + ".old", SOCKET)


def _write(path):
    with open(path, "w") as f:
        f.write("planted")


def attacks(args):
    server_dir = os.environ.get("ROCKROLL_SERVER_DIR", "")
    out = {"uid": os.getuid(), "euid": os.geteuid(), "cwd": os.getcwd(), "caps": {}}
    for line in open("/proc/self/status"):
        key = line.split(":")[0]
        if key in ("CapPrm", "CapEff", "CapBnd", "CapAmb", "CapInh", "NoNewPrivs"):
            out["caps"][key] = line.split()[1]
    out["connect"] = _try(_connect)
    out["replace_socket"] = _try(_replace)
    out["plant_beside_socket"] = _try(lambda: _write(os.path.dirname(SOCKET) + "/planted"))
    out["write_server_dir"] = _try(lambda: _write(os.path.join(server_dir, "planted")))
    out["write_plugins"] = _try(lambda: os.makedirs(os.path.join(server_dir, ".rockroll", "plugins", "evil")))
    out["list_sessions"] = _try(lambda: os.listdir(os.path.join(server_dir, "sessions")))
    out["become_root"] = _become(0)
    if args.get("server_uid") is not None:
        out["become_server"] = _become(int(args["server_uid"]))
    if args.get("server_pid"):
        out["signal_server"] = _try(lambda: os.kill(int(args["server_pid"]), 0))
    if args.get("other"):
        out["read_other"] = _try(lambda: open(os.path.join(args["other"], "secret.txt")).read())
        out["list_other"] = _try(lambda: os.listdir(args["other"]))
        out["plant_other"] = _try(lambda: _write(os.path.join(args["other"], "planted")))
    return out


AT_IMPORT = attacks({})


class Hostile(TextEnv):
    instructions = "Anything."

    def _reset(self, options):
        try:
            with open("secret.txt", "w") as f:
                f.write("s3cret")
        except OSError:
            pass
        self.last = json.dumps({"import": AT_IMPORT, "cwd": os.getcwd()})
        return {}

    def _parse_action(self, answer):
        return answer or None

    def _step(self, action):
        if action == "crash":
            os._exit(3)
        if action == "hang":
            time.sleep(600)
        if action == "flood":  # a frame header far over the cap, on every pipe this process writes
            for fd in map(int, os.listdir("/proc/self/fd")):
                if fd > 2 and os.readlink(f"/proc/self/fd/{fd}").startswith("pipe:"):
                    flags = int(open(f"/proc/self/fdinfo/{fd}").read().split("flags:")[1].split()[0], 8)
                    if flags & 3 == 1:
                        os.write(fd, struct.pack(">I", 0x7FFFFFFF) + b"x" * 100)
            time.sleep(600)
        self.last = json.dumps(attacks(json.loads(action))) if action.startswith("{") else "echo: " + action
        return StepOutcome(self._render(), 1.0, False, effective=True, success=False)

    def _render(self):
        return self.last

    def _get_state(self):
        return {"last": self.last}

    def _set_state(self, data):
        self.last = data["last"]

    def action_candidates(self):
        return ["hi"]
"""
MANIFEST = {
    "id": "mallory/Hostile-v0",
    "entry_point": "rr_hostile_env:Hostile",
    "kwargs": {},
    "max_steps": 50,
    "paths": ["."],
}
PLUGIN_ENV = (
    ("ROCKROLL_ENV_MODULES", "rockroll.sandbox.server.plugins"),
    ("ROCKROLL_ENV_PLUGINS", ".rockroll/plugins"),
    ("ROCKROLL_ENV_WORKER_TIMEOUT_S", "4"),
)
NO_CAPS = "0000000000000000"


@pytest.fixture(autouse=True)
def _plugin_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sandboxes of :func:`sandbox` load plugins (their spec takes the environment from here)."""
    import tests.security.test_agent_uid as uid_tests

    original = uid_tests.SandboxSpec

    def spec(**fields: Any) -> SandboxSpec:
        return original(**fields).model_copy(update={"env": PLUGIN_ENV})

    monkeypatch.setattr(uid_tests, "SandboxSpec", spec)


def _provision(backend: Any, h: Any) -> None:
    backend.write_file(h, ".rockroll/plugins/hostile/manifest.json", json.dumps(MANIFEST).encode())
    backend.write_file(h, ".rockroll/plugins/hostile/rr_hostile_env.py", HOSTILE)


def _refused(report: dict[str, Any], keys: list[str]) -> None:
    for key in keys:
        assert str(report[key]).startswith("REFUSED"), (key, report)


def test_custom_env_code_runs_as_an_agent_uid_and_its_attacks_fail(sandbox: tuple[Any, Any, str]) -> None:  # noqa: F811
    backend, h, server_dir = sandbox
    _provision(backend, h)
    client = backend.client(h, timeout_s=120.0)
    try:
        health = client.call("health")
        server_uid, server_pid = int(health["server_uid"]), int(health["pid"])
        a = client.call("env.make", env_id="mallory/Hostile-v0")["session_id"]
        b = client.call("env.make", env_id="mallory/Hostile-v0")["session_id"]
        first_a = json.loads(client.call("env.reset", session_id=a, seed=0)[0])
        first_b = json.loads(client.call("env.reset", session_id=b, seed=0)[0])
        # the attacks made while the module was imported
        at_import = first_a["import"]
        _refused(at_import, ["connect", "replace_socket", "plant_beside_socket", "write_server_dir", "write_plugins"])
        assert at_import["become_root"] == "REFUSED", at_import
        home_a, home_b = first_a["cwd"], first_b["cwd"]
        assert home_a != home_b and home_a.startswith(f"{server_dir}/sessions/"), (home_a, home_b)
        # and in step, from session B against the server and session A
        args = {"server_uid": server_uid, "server_pid": server_pid, "other": home_a}
        obs = client.call("env.step", session_id=b, action=f"<answer>{json.dumps(args)}</answer>")[0]
        report = json.loads(obs)
        keys = ["connect", "replace_socket", "plant_beside_socket", "write_server_dir", "write_plugins"]
        _refused(report, keys + ["list_sessions", "signal_server", "read_other", "list_other", "plant_other"])
        assert report["become_root"] == report["become_server"] == "REFUSED", report
        # who it is: its own uid (not root, not the server's, not session A's), no capability, no_new_privs
        uid_b = report["uid"]
        assert uid_b == report["euid"] and uid_b not in (0, server_uid, at_import["uid"]), (report, at_import)
        caps = report["caps"]
        assert {caps[k] for k in ("CapPrm", "CapEff", "CapBnd", "CapAmb", "CapInh")} == {NO_CAPS}, caps
        assert caps["NoNewPrivs"] == "1", caps
        assert client.call("env.step", session_id=a, action="<answer>hi</answer>")[0] == "echo: hi"
        # forks are workers of their own too, with the state
        c = client.call("env.fork", session_id=a)["session_id"]
        assert client.call("env.render", session_id=c) == "echo: hi"
        # the server and its socket are intact, and a closed session's worker is gone
        for sid in (a, b, c):
            client.call("env.close", session_id=sid)
        assert client.call("health")["sessions"] == 0
    finally:
        client.close()
    assert backend.exec(h, ["true"]).exit_code == 0


@pytest.mark.slow
def test_a_worker_that_crashes_hangs_or_floods_loses_only_its_session(sandbox: tuple[Any, Any, str]) -> None:  # noqa: F811
    backend, h, _ = sandbox
    _provision(backend, h)
    client = backend.client(h, timeout_s=120.0)
    try:
        boot = client.call("health")["boot_id"]
        good = client.call("env.make", env_id="mallory/Hostile-v0")["session_id"]
        client.call("env.reset", session_id=good, seed=0)
        for action, why in (("crash", "died"), ("hang", "did not answer"), ("flood", "over the cap")):
            sid = client.call("env.make", env_id="mallory/Hostile-v0")["session_id"]
            client.call("env.reset", session_id=sid, seed=0)
            t0 = time.monotonic()
            with pytest.raises(SessionLost) as err:
                client.call("env.step", session_id=sid, action=f"<answer>{action}</answer>")
            assert why in str(err.value) and time.monotonic() - t0 < 30, err.value
            assert isinstance(err.value, SandboxLost)
            with pytest.raises(SessionLost):  # and it stays lost
                client.call("env.render", session_id=sid)
            client.call("env.close", session_id=sid)
        health = client.call("health")
        assert health["boot_id"] == boot and health["sessions"] == 1, health
        assert client.call("env.step", session_id=good, action="<answer>hi</answer>")[0] == "echo: hi"
        with pytest.raises(Exception, match="UnknownEnv|Nope"):
            client.call("env.make", env_id="mallory/Nope-v0")
    finally:
        client.close()


def test_custom_env_through_the_control_plane(dev_client: TestClient) -> None:  # noqa: F811
    problem = confinement_problem()
    if problem:
        pytest.skip(f"process confinement: {problem}")
    body = {
        "id": "Hostile-v0", "kind": "source", "entry_point": "rr_hostile_env:Hostile",
        "source_name": "rr_hostile_env.py", "source_b64": base64.b64encode(HOSTILE).decode(),
    }  # fmt: skip
    r = dev_client.post("/v1/envs", json=body)
    assert r.status_code == 201, r.text
    s = dev_client.post("/v1/sessions", json={"env": "dev/Hostile-v0"}).json()
    first = json.loads(dev_client.post(f"/v1/sessions/{s['id']}/reset", json={"seed": 0}).json()["observation"])
    _refused(first["import"], ["connect", "replace_socket", "write_server_dir", "write_plugins"])
    assert first["cwd"].startswith(f"{SANDBOX_DIR}/srv/sessions/"), first
    r = dev_client.post(f"/v1/sessions/{s['id']}/step", json={"action": "<answer>{}</answer>"})
    assert r.status_code == 200, r.text
    report = json.loads(r.json()["observation"])
    assert report["uid"] != 0 and report["caps"]["CapEff"] == NO_CAPS, report
    # a crashed worker: the session answers 410 sandbox_lost; the server and a new session are fine
    r = dev_client.post(f"/v1/sessions/{s['id']}/step", json={"action": "<answer>crash</answer>"})
    assert r.status_code == 410 and r.json()["error"]["code"] == "sandbox_lost", r.text
    assert dev_client.get("/v1/health").status_code == 200
    s2 = dev_client.post("/v1/sessions", json={"env": "dev/Hostile-v0"}).json()
    assert dev_client.post(f"/v1/sessions/{s2['id']}/reset", json={"seed": 1}).status_code == 200
    r = dev_client.post(f"/v1/sessions/{s2['id']}/step", json={"action": "<answer>hi</answer>"})
    assert r.json()["observation"] == "echo: hi", r.text
