"""OpenEnv interop, both ways, against the real ``openenv-core`` (in ``.venv-openenv``, scripts/setup-openenv.sh):

* OpenEnv's own client (``GenericEnvClient``) plays envs of a real ``rockroll serve-api`` through its ``/openenv``
  face: FrozenLake-v0 step for step like the env in this process, and alice's registered ``alice/Nim-v0``; bob
  gets a 404 for alice's env; malformed frames get OpenEnv's error shape and the session goes on; OpenEnv's
  ``openenv validate --url`` passes.
* rockroll's ``openenv`` env source plays the echo env ``openenv init`` makes, served by OpenEnv's own
  ``create_app``, and the face above; an eval runs through it.

OpenEnv's side runs in one helper process (tests/api/openenv_side.py) that answers commands on its stdin.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

import rockroll.envhub as envhub
from rockroll.agentrl.errors import classify
from rockroll.agentrl.eval.run import run_eval
from rockroll.agentrl.sources.openenv import OpenEnvError, OpenEnvSource
from rockroll.api.server.serve_proc import ServerProc, create_token
from rockroll.client import Client
from rockroll.envhub.errors import UnknownEnvError
from rockroll.envs.errors import EnvConfigError

ROOT = Path(__file__).resolve().parents[2]
VENV_PYTHON = ROOT / ".venv-openenv" / "bin" / "python"
STATUS_FILE = ROOT / ".venv-openenv.status"
NIM = Path(__file__).with_name("nim.py")
ANSWER_S = 120.0  # one command of the helper (its first one waits for OpenEnv's imports)


class OpenEnvSide:
    """The helper process (tests/api/openenv_side.py) in the OpenEnv venv."""

    def __init__(self, python: str) -> None:
        env = {**os.environ, "UV_OFFLINE": "1", "PYTHONPATH": ""}  # `openenv init` may call uv: never the network
        self.proc = subprocess.Popen(
            [python, str(Path(__file__).with_name("openenv_side.py"))], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
        )  # fmt: skip
        self.answers: queue.Queue[dict[str, Any]] = queue.Queue()
        self.lines: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self.proc.stdout or ():
            if line.startswith("@@ "):
                self.answers.put(json.loads(line[3:]))
            else:
                self.lines.append(line)

    def __call__(self, op: str, **args: Any) -> Any:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"op": op, **args}) + "\n")
        self.proc.stdin.flush()
        try:
            answer = self.answers.get(timeout=ANSWER_S)
        except queue.Empty:
            raise AssertionError(f"no answer to {op} in {ANSWER_S} s:\n" + "".join(self.lines[-40:])) from None
        assert answer["ok"], answer.get("traceback") or answer
        return answer["result"]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def openenv() -> Iterator[OpenEnvSide]:
    """OpenEnv's side, or a skip saying why the OpenEnv venv is not there."""
    status = STATUS_FILE.read_text().strip() if STATUS_FILE.is_file() else "not built (bash scripts/setup-openenv.sh)"
    if status != "ok" or not VENV_PYTHON.is_file():
        pytest.skip(f"OpenEnv venv: {status}")
    side = OpenEnvSide(str(VENV_PYTHON))
    yield side
    side.close()


@pytest.fixture(scope="module")
def echo_url(openenv: OpenEnvSide) -> Iterator[str]:
    """OpenEnv's template echo env (``openenv init``) served by OpenEnv's ``create_app``."""
    with tempfile.TemporaryDirectory(prefix="rr-openenv-") as d:
        yield openenv("serve_echo", dir=d)


@pytest.fixture(scope="module")
def nim(server: ServerProc) -> str:
    """alice's private ``alice/Nim-v0``, registered through the API."""
    with Client(server.url, server.tokens["alice"]) as c:  # type: ignore[attr-defined]
        return str(c.register_env("Nim-v0", entry_point="nim:NimEnv", source=NIM, max_steps=6)["id"])


def face(server: ServerProc, who: str | None, env_id: str) -> str:
    """The base URL of ``env_id``'s OpenEnv face, with ``who``'s token as the URL's credentials."""
    scheme, _, rest = server.url.partition("://")
    creds = f"openenv:{quote(server.tokens[who], safe='')}@" if who else ""  # type: ignore[attr-defined]
    return f"{scheme}://{creds}{rest}/openenv/{env_id}"


def wait_until(check: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.05)


# --------------------------------------------------------------------- OpenEnv's client plays rockroll envs


@pytest.mark.slow
def test_openenv_client_plays_frozenlake_like_the_local_env(server: ServerProc, openenv: OpenEnvSide) -> None:
    """Same seed, same episode: OpenEnv's client sees what the env in this process shows, step for step; the
    socket's session is closed when the client leaves."""
    actions = ["<answer>Right</answer>", "<answer>Down</answer>", "no answer", "<answer>Left</answer>"]
    out = openenv("play", url=face(server, "alice", "FrozenLake-v0"), seed=7, actions=[{"message": a} for a in actions])
    local = envhub.make("FrozenLake-v0")
    obs, info = local.reset(seed=7)
    assert out["reset"] == {"observation": {"text": obs, "truncated": False, "info": info}, "reward": None,
                            "done": False}  # fmt: skip
    for action, seen in zip(actions, out["steps"], strict=True):
        obs, reward, terminated, truncated, info = local.step(action)
        assert seen["observation"] == {"text": obs, "truncated": truncated, "info": info}
        assert (seen["reward"], seen["done"]) == (reward, terminated or truncated)
        if terminated or truncated:
            break
    assert out["state"]["env_id"] == "FrozenLake-v0" and out["state"]["step_count"] == len(out["steps"])
    with Client(server.url, server.tokens["alice"]) as c:  # type: ignore[attr-defined]
        wait_until(lambda: not c.list_sessions(), 30, "the OpenEnv session to close")


def test_openenv_client_plays_a_registered_env_of_its_owner_only(
    server: ServerProc, openenv: OpenEnvSide, nim: str
) -> None:
    """alice plays her ``alice/Nim-v0``; bob, and a caller without a token, are refused before a session opens."""
    out = openenv("play", url=face(server, "alice", nim), seed=1, actions=[{"message": "<answer>1</answer>"}])
    assert "stones left" in out["reset"]["observation"]["text"]
    assert out["steps"][0]["observation"]["info"]["action_is_valid"] is True
    assert out["state"]["env_id"] == nim
    refused = openenv("connect", url=face(server, "bob", nim))
    assert "ConnectionError" in refused and "404" in refused, refused
    assert "401" in openenv("connect", url=face(server, None, nim))
    for who, status in (("alice", 200), ("bob", 404), (None, 401)):
        r = httpx.get(face(server, who, nim) + "/health")
        assert r.status_code == status, r.text
    assert httpx.get(face(server, "bob", nim) + "/health").json()["error"]["code"] == "env_not_found"
    assert httpx.get(face(server, "bob", "FrozenLake-v0") + "/health").json() == {"status": "healthy"}


def test_malformed_frames_get_openenv_errors_and_the_session_survives(server: ServerProc, openenv: OpenEnvSide) -> None:
    out = openenv("malformed", url=face(server, "alice", "FrozenLake-v0"))
    codes = [a["code"] for a in out["answers"]]
    assert codes == ["INVALID_JSON", "VALIDATION_ERROR", "UNKNOWN_TYPE", "VALIDATION_ERROR", "VALIDATION_ERROR",
                     "VALIDATION_ERROR", "VALIDATION_ERROR", "VALIDATION_ERROR", "INVALID_JSON"], out["answers"]  # fmt: skip
    assert out["answers"][4]["errors"][0]["loc"] == ["message"]
    assert "code: VALIDATION_ERROR" in out["api_error"]  # OpenEnv's client reads the error frame as its own
    assert out["after"]["observation"]["info"]["action_is_valid"] is True
    assert out["state"]["step_count"] == 1  # only the good step counted; the session went on


def test_openenv_validate_passes_on_the_face(server: ServerProc, openenv: OpenEnvSide) -> None:
    report = openenv("validate", url=face(server, "alice", "FrozenLake-v0"))
    assert report["passed"], json.dumps(report["criteria"], indent=1)
    assert report["standard_profile"] == "openenv-http/1.x" and report["mode"] == "simulation"


def test_http_routes_of_the_face(server: ServerProc) -> None:
    """OpenEnv's stateless HTTP reset/step, its 422 shape for a bad action, metadata with the system prompt."""
    base = face(server, "alice", "FrozenLake-v0")
    first = httpx.post(base + "/reset", json={"seed": 7}, timeout=60).json()
    assert first["observation"]["text"] == envhub.make("FrozenLake-v0").reset(seed=7)[0]
    step = httpx.post(base + "/step", json={"action": {"message": "<answer>Up</answer>"}, "seed": 7}, timeout=60)
    assert step.status_code == 200 and step.json()["observation"]["info"]["action_is_valid"] is True
    bad = httpx.post(base + "/step", json={"action": {"msg": "Up"}}, timeout=60)
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["body", "action", "message"]
    meta = httpx.get(base + "/metadata", timeout=60).json()
    assert meta["name"] == "FrozenLake-v0" and meta["readme_content"] == envhub.make("FrozenLake-v0").system_prompt()
    assert httpx.get(base + "/schema").json()["action"]["required"] == ["message"]


# --------------------------------------------------------------------- rockroll's `openenv` source


def test_openenv_source_plays_openenv_echo_env(echo_url: str) -> None:
    source = OpenEnvSource(echo_url)
    source.check_env("echo")
    env = source.open("echo", {})
    try:
        obs, info = env.reset(seed=1)
        assert obs == "Echo Env environment ready!" and info["message_length"] == 0
        assert env.step("hello") == ("hello", pytest.approx(0.5), False, False, {
            "message_length": 5, "action_is_valid": True, "action_is_effective": True, "success": False})  # fmt: skip
        assert env.get_state()["step_count"] == 1
        assert env.system_prompt() == "EchoEnvironment environment"
    finally:
        source.close(env)
    assert source.open_count == 0
    with pytest.raises(EnvConfigError, match="action_field"):
        source.open("echo", {"action_field": "message", "size": 4})


def test_eval_runs_through_the_openenv_source(echo_url: str) -> None:
    config = {
        "engine": {"kind": "random"}, "source": {"kind": "openenv", "url": echo_url},
        "episode": {"max_turns": 3}, "envs": [{"env": "echo", "episodes": 2}],
    }  # fmt: skip
    report = run_eval(config, progress=False)
    assert report.summary["count"] == 2 and report.summary["masked"] == 0, report.episodes
    assert report.per_env["echo"]["mean_reward"] > 0  # the echo env rewards the answer's length


def test_openenv_source_plays_rockroll_envs_through_the_face(
    server: ServerProc, nim: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Round trip: the face's observation and info come back as the env's own; ``{env}`` in the URL picks the env;
    another owner's env is unknown (fatal), a bad action field a validation error (fatal)."""
    url = server.url + "/openenv/{env}"
    source = OpenEnvSource(url, token=server.tokens["alice"])  # type: ignore[attr-defined]
    env = source.open("FrozenLake-v0", {})
    local = envhub.make("FrozenLake-v0")
    try:
        assert env.reset(seed=3) == local.reset(seed=3)
        assert env.step("<answer>Down</answer>") == local.step("<answer>Down</answer>")
        assert env.system_prompt() == local.system_prompt()
    finally:
        source.close(env)
    with pytest.raises(UnknownEnvError):
        OpenEnvSource(url, token=server.tokens["bob"]).check_env(nim)  # type: ignore[attr-defined]
    wrong = source.open(nim, {"action_field": "text"})
    try:
        wrong.reset(seed=0)
        with pytest.raises(OpenEnvError) as e:
            wrong.step("<answer>1</answer>")
        assert e.value.code == "VALIDATION_ERROR" and classify(e.value) == "fatal"
    finally:
        source.close(wrong)
    monkeypatch.setenv("OE_TOKEN", server.tokens["alice"])  # type: ignore[attr-defined]
    config = {
        "engine": {"kind": "random", "args": {"actions": ["1", "2", "3"]}}, "episode": {"max_turns": 4},
        "source": {"kind": "openenv", "url": url, "token_env": "OE_TOKEN"}, "envs": [{"env": nim, "episodes": 2}],
    }  # fmt: skip
    report = run_eval(config, progress=False)
    assert report.summary["count"] == 2 and report.summary["masked"] == 0, report.episodes


def test_a_revoked_token_closes_the_openenv_socket(server: ServerProc) -> None:
    from rockroll.api.db import Database
    from rockroll.api.server.auth import lookup_token, revoke_token

    token = create_token(server.db_url, "carol")
    env = OpenEnvSource(server.url + "/openenv/{env}", token=token).open("FrozenLake-v0", {})
    env.reset(seed=0)
    db = Database(server.db_url)
    try:
        principal = lookup_token(db, token)
        assert principal is not None and revoke_token(db, principal.token_id)
    finally:
        db.close()
    closed: list[str] = []

    def step_fails() -> bool:
        try:
            env.step("<answer>Up</answer>")  # answered while the token is cached (and an ended episode: an error)
        except OpenEnvError:
            return False
        except ConnectionError as e:
            closed.append(str(e))
            return True
        return False

    wait_until(step_fails, 10, "the revoked token's socket to close")
    assert "token_revoked" in closed[0]
    env.close()


def test_openenv_error_frames_are_infra_or_fatal() -> None:
    capacity = OpenEnvError.from_frame({"message": "full", "code": "CAPACITY_REACHED", "active_sessions": 1})
    assert (capacity.status, capacity.details) == (429, {"active_sessions": 1}) and classify(capacity) == "infra"
    assert classify(OpenEnvError.from_frame({"message": "boom", "code": "EXECUTION_ERROR"})) == "infra"
    assert classify(OpenEnvError.from_frame({"message": "bad", "code": "VALIDATION_ERROR"})) == "fatal"
    reset_needed = OpenEnvError.from_frame({"message": "reset first", "code": "EXECUTION_ERROR", "status": 409})
    assert classify(reset_needed) == "infra"  # rockroll's face says which status its error had


def test_openenv_source_sends_a_token_only_when_the_config_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from rockroll.agentrl.eval.config import SourceConfig
    from rockroll.agentrl.sources.kinds import open_source

    monkeypatch.setenv("ROCKROLL_TOKEN", "rr_secret")
    with open_source(SourceConfig(kind="openenv", url="http://h:1")) as src:
        assert src.headers == {}  # type: ignore[attr-defined]
    with open_source(SourceConfig(kind="openenv", url="ws://h:1/openenv/{env}", token_env="ROCKROLL_TOKEN")) as src:
        assert src.headers == {"Authorization": "Bearer rr_secret"}  # type: ignore[attr-defined]
        assert src.url_for("alice/Nim-v0") == "http://h:1/openenv/alice/Nim-v0"  # type: ignore[attr-defined]
