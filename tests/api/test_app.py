"""The app in-process (TestClient) over real SQLite: health, metrics, envs, errors, jobs."""

from __future__ import annotations

import base64
import time

import pytest
from fastapi.testclient import TestClient

from rockroll.api.server.app import create_app
from tests.api.conftest import make_settings


def _err(resp) -> dict:
    body = resp.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"code", "message", "details"}, body
    return body["error"]


def test_health_and_metrics(dev_client: TestClient) -> None:
    h = dev_client.get("/v1/health").json()
    assert h["status"] == "ok" and h["backend"] == "process" and h["dev_mode"] is True
    assert isinstance(h["sandboxes"], dict)
    text = dev_client.get("/metrics").text
    for name in (
        "rockroll_sandboxes",
        "rockroll_sandbox_restarts",
        "rockroll_session_steps_total",
        "rockroll_step_latency_seconds_bucket",
        "rockroll_api_request_seconds_bucket",
    ):
        assert name in text
    assert 'route="/v1/health"' in text


def test_openapi_and_docs(dev_client: TestClient) -> None:
    spec = dev_client.get("/openapi.json").json()
    for path in (
        "/v1/envs",
        "/v1/sessions/{session_id}/step",
        "/v1/jobs/{job_id}/cancel",
        "/v1/sandboxes/{sandbox_id}/files",
    ):
        assert path in spec["paths"]
    assert dev_client.get("/docs").status_code == 200


def test_envs_list_show_and_unknown(dev_client: TestClient) -> None:
    envs = dev_client.get("/v1/envs").json()["envs"]
    assert "FrozenLake-v0" in [e["id"] for e in envs]
    grid = dev_client.get("/v1/envs", params={"tag": "grid"}).json()["envs"]
    assert grid and all("grid" in e["tags"] for e in grid)
    assert dev_client.get("/v1/envs/FrozenLake").json()["id"] == "FrozenLake-v0"
    r = dev_client.get("/v1/envs/FrozenLak-v0")
    assert r.status_code == 404
    err = _err(r)
    assert err["code"] == "env_not_found" and "FrozenLake-v0" in err["details"]["suggestions"]


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "code"),
    [
        ("POST", "/v1/sessions", {"env": "FrozenLake-v0", "bogus": 1}, 422, "validation_error"),
        ("POST", "/v1/sessions", {"env": ""}, 422, "validation_error"),
        ("POST", "/v1/jobs", {"kind": "dance", "config": {}}, 422, "validation_error"),
        ("POST", "/v1/jobs", {"kind": "eval", "config": {"episodes": 3}}, 400, "invalid_job"),
        ("POST", "/v1/envs", {"id": "nover", "kind": "source", "entry_point": "a:b"}, 422, "validation_error"),
        ("POST", "/v1/envs", {"id": "FrozenLake-v0", "kind": "entry_point", "entry_point": "a:b"}, 409, "env_exists"),
        ("POST", "/v1/envs", {"id": "X-v0", "kind": "source", "entry_point": "x:X"}, 400, "invalid_env_spec"),
        ("DELETE", "/v1/envs/FrozenLake-v0", None, 403, "forbidden"),
        ("GET", "/v1/sessions/nope", None, 404, "session_not_found"),
        ("GET", "/v1/sandboxes/nope", None, 404, "sandbox_not_found"),
        ("GET", "/v1/jobs/nope", None, 404, "job_not_found"),
        ("GET", "/v1/nothing-here", None, 404, "not_found"),
        ("PATCH", "/v1/envs", None, 405, "method_not_allowed"),
    ],
)
def test_bad_input_gives_error_body(
    dev_client: TestClient, method: str, path: str, body, status: int, code: str
) -> None:
    r = dev_client.request(method, path, json=body)
    assert r.status_code == status, r.text
    assert _err(r)["code"] == code


def test_malformed_json_is_422(dev_client: TestClient) -> None:
    r = dev_client.post("/v1/sessions", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 422 and _err(r)["code"] == "validation_error"


def test_bad_base64_upload(dev_client: TestClient) -> None:
    r = dev_client.post(
        "/v1/envs",
        json={"id": "Up-v0", "kind": "source", "entry_point": "up:Up", "source_name": "up.py", "source_b64": "!!!"},
    )
    assert r.status_code == 400 and _err(r)["code"] == "invalid_env_spec"


def test_failing_custom_env_is_rejected_with_its_error(dev_client: TestClient) -> None:
    src = (
        b"from rockroll.envs.frozenlake import FrozenLakeEnv\nclass Broken(FrozenLakeEnv):\n"
        b"    def _reset(self, options):\n        raise RuntimeError('broken on purpose')\n"
    )
    r = dev_client.post(
        "/v1/envs",
        json={
            "id": "Broken-v0",
            "kind": "source",
            "entry_point": "broken:Broken",
            "source_name": "broken.py",
            "source_b64": base64.b64encode(src).decode(),
        },
    )
    assert r.status_code == 400, r.text
    err = _err(r)
    assert err["code"] == "env_validation_failed" and "broken on purpose" in err["message"]
    assert err["details"]["stage"] == "reset"
    assert dev_client.get("/v1/envs/Broken-v0").status_code == 404


def test_a_custom_tool_env_with_an_invalid_schema_is_rejected_naming_the_field(dev_client: TestClient) -> None:
    src = (
        b"from rockroll.envs.lookup import LookupEnv\nfrom rockroll.envs.tools import Tool\n"
        b"class Bad(LookupEnv):\n"
        b"    tools = (*LookupEnv.tools, Tool('count', 'n', {'type': 'object', 'properties': {'n': {'type': 7}}}))\n"
    )
    body = {"id": "BadTools-v0", "kind": "source", "entry_point": "badtools:Bad", "source_name": "badtools.py"}
    r = dev_client.post("/v1/envs", json={**body, "source_b64": base64.b64encode(src).decode()})
    assert r.status_code == 400, r.text
    err = _err(r)
    assert err["code"] == "env_validation_failed" and err["details"]["stage"] == "tools"
    assert "tools[3].parameters" in err["message"]
    assert dev_client.get("/v1/envs/BadTools-v0").status_code == 404


def test_eval_job_runs_random_agent_and_persists(dev_client: TestClient) -> None:
    job = dev_client.post("/v1/jobs", json={"kind": "eval", "config": {"env": "FrozenLake-v0", "episodes": 4}}).json()
    assert job["state"] in ("queued", "running")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        job = dev_client.get(f"/v1/jobs/{job['id']}").json()
        if job["state"] in ("succeeded", "failed"):
            break
        time.sleep(0.1)
    assert job["state"] == "succeeded", job
    assert job["progress"] == 1.0 and job["metrics"]["episodes"] == 4
    assert 0.0 <= job["metrics"]["eval/FrozenLake-v0/success"] <= 1.0
    logs = dev_client.get(f"/v1/jobs/{job['id']}/logs").text
    assert "episode 3" in logs and "job succeeded" in logs
    assert job["id"] in [j["id"] for j in dev_client.get("/v1/jobs").json()["jobs"]]
    assert dev_client.post(f"/v1/jobs/{job['id']}/cancel").status_code == 409


def test_cancel_long_eval_job(dev_client: TestClient) -> None:
    job = dev_client.post(
        "/v1/jobs", json={"kind": "eval", "config": {"env": "FrozenLake-v0", "episodes": 100_000}}
    ).json()
    time.sleep(0.5)
    assert dev_client.post(f"/v1/jobs/{job['id']}/cancel").status_code == 200
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        job = dev_client.get(f"/v1/jobs/{job['id']}").json()
        if job["state"] == "cancelled":
            break
        time.sleep(0.1)
    assert job["state"] == "cancelled"


def test_train_job_config_is_validated_at_submission(dev_client: TestClient) -> None:
    """A train job's config is a typed TrainConfig: a bad key answers 400 naming it, no job is queued."""
    before = len(dev_client.get("/v1/jobs").json()["jobs"])
    r = dev_client.post("/v1/jobs", json={"kind": "train", "config": {"nonsense_key": 1}})
    assert r.status_code == 400 and _err(r)["code"] == "invalid_job"
    assert "unknown key nonsense_key" in _err(r)["message"] and _err(r)["details"]["key"] == "nonsense_key"
    r = dev_client.post("/v1/jobs", json={"kind": "train", "config": {"rollout": {"mode": "fast"}}})
    assert r.status_code == 400 and _err(r)["details"]["key"] == "rollout.mode"
    assert _err(r)["details"]["allowed"] == "plan, multiturn, rlvr"
    r = dev_client.post("/v1/jobs", json={"kind": "train", "config": {"overrides": ["optim.lr=abc"]}})
    assert r.status_code == 400 and "optim.lr must be a number" in _err(r)["message"]
    r = dev_client.post("/v1/jobs", json={"kind": "eval", "config": {"env": "FrozenLake-v0", "policy": "smart"}})
    assert r.status_code == 400 and _err(r)["details"] == {
        "key": "policy",
        "allowed": "random, expert",
        "problems": [{"key": "policy", "message": "policy must be one of random, expert; got 'smart'"}],
    }
    assert len(dev_client.get("/v1/jobs").json()["jobs"]) == before
    schema = dev_client.get("/openapi.json").json()["components"]["schemas"]
    assert {"TrainJobConfig", "EvalConfig", "PolicyEvalConfig", "SandboxCreate"} <= set(schema)


def test_auth_required_without_dev_mode(data_dir) -> None:
    from rockroll.api.db import Database
    from rockroll.api.server.auth import create_token

    db = Database(f"sqlite:///{data_dir}/rockroll.db")
    db.migrate()
    token = create_token(db, "carol")
    db.close()
    with TestClient(create_app(make_settings(data_dir))) as c:
        assert c.get("/v1/health").status_code == 200
        assert c.get("/metrics").status_code == 200
        assert c.get("/ui").status_code == 200 and c.get("/ui/app.js").status_code == 200
        r = c.get("/v1/envs")
        assert r.status_code == 401 and _err(r)["code"] == "unauthorized"
        assert c.get("/v1/envs", headers={"Authorization": "Bearer rr_wrong"}).status_code == 401
        assert c.get("/v1/envs", headers={"Authorization": "Basic abc"}).status_code == 401
        assert c.get("/v1/envs", headers={"Authorization": f"Bearer {token}"}).status_code == 200
        assert c.get("/v1/overview", headers={"Authorization": f"Bearer {token}"}).json()["principal"] == {
            "owner": "carol",
            "admin": False,
        }


def test_idle_sessions_are_reaped(dev_client: TestClient) -> None:
    sid = dev_client.post("/v1/sessions", json={"env": "FrozenLake-v0"}).json()["id"]
    registry = dev_client.app.state.rr.sessions
    assert registry.reap_idle(3600) == 0
    assert registry.reap_idle(0) == 1
    assert dev_client.get(f"/v1/sessions/{sid}").status_code == 404


def test_sandbox_quota_per_owner(data_dir) -> None:
    with TestClient(create_app(make_settings(data_dir, dev_mode=True, max_sandboxes_per_owner=1))) as c:
        first = c.post("/v1/sandboxes", json={})
        assert first.status_code == 201
        second = c.post("/v1/sandboxes", json={})
        assert second.status_code == 429 and _err(second)["details"]["what"] == "sandboxes per owner"
        c.delete(f"/v1/sandboxes/{first.json()['id']}")
        assert c.post("/v1/sandboxes", json={}).status_code == 201
        for sb in c.app.state.rr.placement.list():
            c.app.state.rr.placement.delete(sb.id)


def test_model_eval_job_runs_an_engine_on_sandboxed_envs(dev_client: TestClient) -> None:
    """An eval config in ``rockroll eval``'s format runs that engine through the API's sandboxes."""
    config = {
        "engine": {"kind": "random", "args": {"seed": 0}},
        "envs": [{"env": "FrozenLake-v0", "episodes": 4}],
        "episode": {"max_turns": 5},
        "concurrency": 2,
    }
    job = dev_client.post("/v1/jobs", json={"kind": "eval", "config": config}).json()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and job["state"] not in ("succeeded", "failed"):
        time.sleep(0.2)
        job = dev_client.get(f"/v1/jobs/{job['id']}").json()
    assert job["state"] == "succeeded", job
    assert job["progress"] == 1.0
    assert any(k.endswith("success") for k in job["metrics"]), job["metrics"]
    bad = dev_client.post("/v1/jobs", json={"kind": "eval", "config": {"engine": {"kind": "random"}, "nope": 1}})
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_job"


def test_sandbox_create_is_derived_from_sandbox_spec() -> None:
    """The body of POST /v1/sandboxes is SandboxSpec's caller-settable fields (same types, bounds, descriptions)
    plus the lifetime ``ttl_s``, which the control plane enforces."""
    from rockroll.api.server.schemas import SandboxCreate
    from rockroll.sandbox.base import SandboxSpec

    assert set(SandboxCreate.model_fields) - set(SandboxSpec.model_fields) == {"ttl_s"}  # the server's, not the spec's
    for name, f in SandboxCreate.model_fields.items():
        if name == "ttl_s":
            continue
        spec = SandboxSpec.model_fields[name]
        assert (f.metadata, f.description) == (spec.metadata, spec.description), name
    assert set(SandboxSpec.model_fields) - set(SandboxCreate.model_fields) == {"env", "startup_timeout_s"}
    assert SandboxCreate().name == "user" and SandboxCreate().memory_mb == SandboxSpec().memory_mb
