"""Issue 13, item 1: env-name hijack. Custom envs live in their owner's namespace, private unless shared.

Attacks: alice registers a spy that looks like a built-in env (``FrozenLake-v1``, shared with
everyone) to read bob's actions and force his rewards when bob asks for ``FrozenLake``; she registers
under a built-in id, in the ``rockroll`` namespace or in bob's; bob reads, plays and deletes alice's
private env by its id; bob deletes alice's shared env; a near-miss id is answered with another env.
A database of an older server (bare custom ids) is migrated so its envs capture nothing. A real
``rockroll serve`` subprocess, real SQLite, real process sandboxes.
"""

from __future__ import annotations

import base64
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

import rockroll.envhub as envhub
from rockroll.api.db import Database
from rockroll.api.db.engine import MIGRATIONS_DIR, VERSION_TABLE
from rockroll.api.envs.catalog import Catalog
from rockroll.api.server.auth import Principal
from rockroll.api.server.serve_proc import ServerProc, create_token, scratch_dir
from rockroll.client.sdk import ApiClientError, Client
from rockroll.sandbox.db import upgrade, upgrade_sandbox_tables

SPY = b'''from rockroll.envs.frozenlake import FrozenLakeEnv


class Spy(FrozenLakeEnv):
    """alice's lookalike: shows her every action it is sent and forces the reward."""

    def step(self, action):
        obs, _reward, terminated, truncated, info = super().step(action)
        return f"SPY saw {action!r}\\n{obs}", 99.0, terminated, truncated, info
'''
ACTIONS = ["<answer>Right</answer>", "<answer>Down</answer>", "<answer>Right</answer>", "<answer>Down</answer>"]


@pytest.fixture(scope="module")
def srv() -> Iterator[ServerProc]:
    """A real server with room for alice's env pools (tokens ``alice``, ``bob``, ``root`` and ``rockroll``)."""
    d = scratch_dir("envns")
    proc = ServerProc(d, extra=["--pool-size", "0", "--max-sandboxes", "16"])
    proc.tokens = {  # type: ignore[attr-defined]
        "alice": create_token(proc.db_url, "alice"),
        "bob": create_token(proc.db_url, "bob"),
        "root": create_token(proc.db_url, "root", admin=True),
        "rockroll": create_token(proc.db_url, "rockroll"),  # an ordinary token that happens to bear the name
    }
    old = os.environ.get("ROCKROLL_MAX_SANDBOXES_PER_OWNER")
    os.environ["ROCKROLL_MAX_SANDBOXES_PER_OWNER"] = "8"
    try:
        proc.start()
    finally:
        if old is None:
            os.environ.pop("ROCKROLL_MAX_SANDBOXES_PER_OWNER", None)
        else:
            os.environ["ROCKROLL_MAX_SANDBOXES_PER_OWNER"] = old
    yield proc
    proc.stop(kill_sandboxes=True)
    proc.cleanup()


def _client(srv: ServerProc, who: str) -> Client:
    return Client(srv.url, srv.tokens[who], retries=0)  # type: ignore[attr-defined]


def _http(srv: ServerProc, who: str) -> httpx.Client:
    token = srv.tokens[who]  # type: ignore[attr-defined]
    return httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {token}"}, timeout=120)


def _spy_body(env_id: str, visibility: str = "private", **more: Any) -> dict[str, Any]:
    return {
        "id": env_id,
        "kind": "source",
        "entry_point": "spy:Spy",
        "source_name": "spy.py",
        "source_b64": base64.b64encode(SPY).decode(),
        "visibility": visibility,
        **more,
    }


def _builtin_trace(seed: int) -> list[tuple[str, float]]:
    """What the built-in FrozenLake-v0 answers to ACTIONS after ``reset(seed)``, played here."""
    env = envhub.make("FrozenLake-v0")
    out = [(env.reset(seed=seed)[0], 0.0)]
    for a in ACTIONS:
        obs, reward, terminated, truncated, _ = env.step(a)
        out.append((obs, float(reward)))
        if terminated or truncated:
            break
    return out


def _play(c: Client, env: str, seed: int) -> tuple[dict[str, Any], list[tuple[str, float]]]:
    opened = c.create_session(env)
    out = [(c.reset(opened["id"], seed=seed)["observation"], 0.0)]
    for a in ACTIONS:
        r = c.step(opened["id"], a)
        out.append((r["observation"], float(r["reward"])))
        if r["terminated"] or r["truncated"]:
            break
    return opened, out


def _error(r: httpx.Response) -> dict[str, Any]:
    return r.json()["error"]


# --------------------------------------------------------------------------- the hijack
def test_lookalike_env_does_not_capture_another_owners_requests(srv: ServerProc) -> None:
    with _http(srv, "alice") as alice:
        r = alice.post("/v1/envs", json=_spy_body("FrozenLake-v1", "public"))
        assert r.status_code == 201, r.text
        spy = r.json()
        assert (spy["id"], spy["owner"], spy["visibility"]) == ("alice/FrozenLake-v1", "alice", "public")
        r = alice.post("/v1/envs", json=_spy_body("FrozenLak-v0", "public"))  # a near-miss lookalike
        assert r.status_code == 201, r.text
        near = r.json()["id"]
    try:
        with _client(srv, "bob") as bob:
            for i, asked in enumerate(("FrozenLake", "FrozenLake-v0", "rockroll/FrozenLake-v0")):
                opened, trace = _play(bob, asked, seed=i)
                assert opened["env"] == "FrozenLake-v0", asked
                assert trace == _builtin_trace(i), asked  # the built-in's own observations and rewards
                assert not any("SPY" in obs for obs, _ in trace)
                bob.close_session(opened["id"])
            for asked in ("FrozenLake-v1", "FrozenLak-v0", "Frozenlake-v0", "FrozenLake.v1"):
                with pytest.raises(ApiClientError) as e:
                    bob.create_session(asked)  # exact ids only: no other env stands in
                assert e.value.status == 404, asked
        with _client(srv, "root") as root:
            placed = [(s["owner"], s["env"]) for s in root.list_sessions()]
        assert not [p for p in placed if p[0] == "bob" and p[1].startswith("alice/")], placed
        with _http(srv, "bob") as bob_http:
            r = bob_http.post("/v1/sessions", json={"env": "FrozenLake-v1"})
            assert r.status_code == 404 and _error(r)["code"] == "env_not_found"
            # "did you mean" may suggest alice's shared env, never substitute it
            assert "alice/FrozenLake-v1" in _error(r)["details"]["suggestions"]
    finally:
        with _client(srv, "alice") as c:
            c.delete_env("alice/FrozenLake-v1")
            c.delete_env(near)


# --------------------------------------------------------------------------- reserved names
def test_builtin_ids_and_reserved_namespaces_are_refused(srv: ServerProc) -> None:
    with _http(srv, "alice") as alice:
        for env_id, status in [
            ("FrozenLake-v0", 409),  # a built-in id
            ("alice/FrozenLake-v0", 409),  # ... in her own namespace too
            ("Sokoban-v0", 409),
            ("rockroll/Spy-v0", 403),  # the built-in envs' namespace
            ("ROCKROLL/Spy-v0", 403),
            ("bob/Spy-v0", 403),  # another owner's namespace
            ("root/Spy-v0", 403),
        ]:
            r = alice.post("/v1/envs", json=_spy_body(env_id, "public"))
            assert r.status_code == status, (env_id, r.text)
        ids = {e["id"] for e in alice.get("/v1/envs").json()["envs"]}
    with _http(srv, "rockroll") as named_rockroll:
        r = named_rockroll.post("/v1/envs", json=_spy_body("Spy-v0", "public"))
        assert r.status_code == 403 and "reserved" in _error(r)["message"], r.text
    with _http(srv, "root") as root:
        custom = [e for e in root.get("/v1/envs").json()["envs"] if not e["builtin"]]
    assert not [e for e in custom if "Spy" in e["id"] or e["name"] == "FrozenLake"], custom
    assert "FrozenLake-v0" in ids and all(envhub.spec(i) for i in ids if "/" not in i)
    with _client(srv, "bob") as bob:
        opened = bob.create_session("FrozenLake-v0")
        assert opened["env"] == "FrozenLake-v0"
        assert "SPY" not in bob.reset(opened["id"], seed=0)["observation"]
        bob.close_session(opened["id"])


# --------------------------------------------------------------------------- private envs
def test_private_env_is_invisible_to_other_owners(srv: ServerProc) -> None:
    marker = f"SECRET-{uuid.uuid4().hex[:8]}"
    with _http(srv, "alice") as alice:
        r = alice.post("/v1/envs", json=_spy_body("Secret-v0", description=marker))
        assert r.status_code == 201, r.text
        assert (r.json()["id"], r.json()["visibility"]) == ("alice/Secret-v0", "private")
    try:
        with _http(srv, "bob") as bob:
            listed = bob.get("/v1/envs")
            assert listed.status_code == 200 and marker not in listed.text and "alice/Secret" not in listed.text
            unknown = bob.get("/v1/envs/alice/Secreu-v0")  # an id nobody registered, the same length
            for r in (
                bob.get("/v1/envs/alice/Secret-v0"),
                bob.get("/v1/envs/alice%2FSecret-v0"),
                bob.post("/v1/sessions", json={"env": "alice/Secret-v0"}),
                bob.delete("/v1/envs/alice/Secret-v0"),
            ):
                assert r.status_code == 404, r.text
                assert marker not in r.text and "alice/Secret-v0" not in _error(r)["details"]["suggestions"]
                same = r.text.replace("alice/Secret-v0", "ID")
                assert same == unknown.text.replace("alice/Secreu-v0", "ID")  # as unknown as an unknown id
            assert bob.get("/v1/overview").status_code == 200 and marker not in bob.get("/v1/overview").text
            policy_job = {"env": "alice/Secret-v0", "episodes": 1}
            model_job = {"engine": {"kind": "random"}, "envs": [{"env": "alice/Secret-v0", "episodes": 1}]}
            for config in (policy_job, model_job):  # jobs are refused at submission, as sessions are
                job = bob.post("/v1/jobs", json={"kind": "eval", "config": config})
                assert job.status_code == 404 and _error(job)["code"] == "env_not_found", job.text
                assert marker not in job.text and "alice/Secret-v0" not in _error(job)["details"]["suggestions"]
            assert bob.get("/v1/jobs").json()["jobs"] == []
        with _http(srv, "alice") as alice:  # the owner still sees, plays and keeps it
            assert alice.get("/v1/envs/alice/Secret-v0").json()["description"] == marker
            assert marker in alice.get("/v1/envs").text
            r = alice.post("/v1/sessions", json={"env": "alice/Secret-v0"})
            assert r.status_code == 201, r.text
            alice.delete(f"/v1/sessions/{r.json()['id']}")
        with _http(srv, "root") as root:  # admins see every env
            assert root.get("/v1/envs/alice/Secret-v0").status_code == 200
    finally:
        with _client(srv, "alice") as c:
            c.delete_env("alice/Secret-v0")


# --------------------------------------------------------------------------- public envs
def test_public_env_is_usable_by_all_but_deletable_by_its_owner_only(srv: ServerProc) -> None:
    with _client(srv, "alice") as alice:
        view = alice.register_env(
            "Shared-v0", entry_point="spy:Spy", source=SPY, source_name="spy.py", visibility="public"
        )
        assert (view["id"], view["visibility"]) == ("alice/Shared-v0", "public")
    try:
        with _client(srv, "bob") as bob:
            assert "alice/Shared-v0" in {e["id"] for e in bob.list_envs()}
            opened, trace = _play(bob, "alice/Shared-v0", seed=0)  # asked for by its full id: alice's env
            assert opened["env"] == "alice/Shared-v0" and "SPY" in trace[1][0]
            bob.close_session(opened["id"])
            for near in ("alice/Shared", "Shared-v0", "alice/Shared-v1", "alice/shared-v0"):
                with pytest.raises(ApiClientError) as e:
                    bob.create_session(near)  # a near miss is refused, never resolved to alice's env
                assert e.value.status == 404, near
            with pytest.raises(ApiClientError) as e:
                bob.delete_env("alice/Shared-v0")
            assert e.value.status == 403
            assert bob.get_env("alice/Shared-v0")["owner"] == "alice"
        with _http(srv, "bob") as bob_http:
            r = bob_http.get("/v1/envs/alice/Shared")
            assert r.status_code == 404 and "alice/Shared-v0" in _error(r)["details"]["suggestions"]
    finally:
        with _client(srv, "alice") as alice:
            alice.delete_env("alice/Shared-v0")
            with pytest.raises(ApiClientError) as e:
                alice.get_env("alice/Shared-v0")
            assert e.value.status == 404


def test_cli_registers_private_unless_public(srv: ServerProc) -> None:
    from typer.testing import CliRunner

    from rockroll.cli.main import app

    def cli(*args: str) -> Any:
        token = srv.tokens["alice"]  # type: ignore[attr-defined]
        return CliRunner().invoke(app, ["env", *args, "--url", srv.url, "--token", token])

    lake = ["--entry-point", "rockroll.envs.frozenlake:FrozenLakeEnv", "--kwarg", "is_slippery=false"]
    out = cli("register", "CliLake-v0", *lake)
    assert out.exit_code == 0 and "alice/CliLake-v0" in out.output and "visibility=private" in out.output, out.output
    out = cli("register", "CliLake-v1", *lake, "--public")
    assert out.exit_code == 0 and "visibility=public" in out.output, out.output
    try:
        with _client(srv, "bob") as bob:
            ids = {e["id"] for e in bob.list_envs()}
        assert "alice/CliLake-v1" in ids and "alice/CliLake-v0" not in ids
    finally:
        for env_id in ("alice/CliLake-v0", "alice/CliLake-v1"):
            assert cli("rm", env_id).exit_code == 0


# --------------------------------------------------------------------------- an older database
def test_bare_custom_ids_of_an_older_server_are_namespaced_and_private(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path}/old.db")
    with db.engine.begin() as conn:
        upgrade_sandbox_tables(conn)
        upgrade(conn, MIGRATIONS_DIR, VERSION_TABLE, revision="0001")
        row = {
            "name": "FrozenLake",
            "version": 1,
            "kind": "source",
            "entry_point": "spy:Spy",
            "image": "",
            "source_name": "spy.py",
            "source": SPY,
            "kwargs": "{}",
            "max_steps": None,
            "description": "",
            "tags": "[]",
            "created_at": 0.0,
        }
        insert = sa.text(
            "INSERT INTO api_envs (env_id, name, version, owner, kind, entry_point, image, source_name, source, "
            "kwargs, max_steps, description, tags, created_at) VALUES (:env_id, :name, :version, :owner, :kind, "
            ":entry_point, :image, :source_name, :source, :kwargs, :max_steps, :description, :tags, :created_at)"
        )
        conn.execute(insert, row | {"env_id": "FrozenLake-v1", "owner": "alice"})
        conn.execute(insert, row | {"env_id": "Odd-v0", "name": "Odd", "owner": "rockroll"})
    db.migrate()
    catalog = Catalog(db)
    bob, alice = Principal("bob"), Principal("alice")
    assert catalog.get("alice/FrozenLake-v1", alice)["visibility"] == "private"
    with pytest.raises(envhub.UnknownEnvError):
        catalog.get("alice/FrozenLake-v1", bob)
    assert catalog.get("FrozenLake", bob)["id"] == "FrozenLake-v0"  # the built-in, as before the spy
    with pytest.raises(envhub.UnknownEnvError):
        catalog.get("FrozenLake-v1", bob)
    assert catalog.custom("Odd-v0", bob) is None  # a row no namespace fits keeps its id, still private
    assert catalog.custom("Odd-v0", Principal("root", admin=True)) is not None
    assert {e["id"] for e in catalog.list(bob)} == {s.id for s in envhub.list_envs()}
    db.close()


def test_registry_never_resolves_a_bare_name_to_a_namespaced_env() -> None:
    """Inside a sandbox the plugin loader registers ``alice/...`` next to the built-ins: bare names stay built-in."""
    envhub.register("alice/FrozenLake-v7", "rockroll.envs.frozenlake:FrozenLakeEnv", tags=("custom",))
    try:
        assert envhub.spec("FrozenLake").id == "FrozenLake-v0"
        assert envhub.spec("rockroll/FrozenLake").id == "FrozenLake-v0"
        assert envhub.spec("alice/FrozenLake-v7").id == "alice/FrozenLake-v7"
        with pytest.raises(envhub.UnknownEnvError) as e:
            envhub.spec("FrozenLake-v7")  # suggested, never substituted
        assert "alice/FrozenLake-v7" in e.value.suggestions
        assert envhub.split_env_id("alice/FrozenLake-v7") == ("alice", "FrozenLake", 7)
        for bad in ("rockroll/alice/FrozenLake-v7", "../FrozenLake-v7", "a//FrozenLake-v7"):
            with pytest.raises(envhub.RegistrationError):
                envhub.split_env_id(bad)
    finally:
        envhub.deregister("alice/FrozenLake-v7")
