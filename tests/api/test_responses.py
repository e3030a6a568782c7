"""Every JSON route declares its answer (:mod:`rockroll.client.responses`), and every answer is exactly that.

Validation re-emits an answer's keys in the model's declared order and keeps (``extra="allow"``)
the keys a model lacks, which the docs would then miss: so each answer must carry exactly the
declared keys, all the way down, and the views the routes build must already be in declared order
(else validation would reorder the JSON the routes used to send).
"""

from __future__ import annotations

import base64
import re
import types
from typing import Any, NotRequired, Union, get_args, get_origin, get_type_hints

from fastapi.testclient import TestClient
from typing_extensions import is_typeddict  # typing.is_typeddict misses typing_extensions TypedDicts before 3.12

import rockroll.envhub as envhub
from rockroll.api.envs.catalog import CustomEnv, builtin_view
from rockroll.client import responses

COUNTER = b"""
from rockroll.envs.core import StepOutcome, TextEnv


class Counter(TextEnv):
    instructions = "Say up."

    def _reset(self, options):
        self.n = 0
        return {}

    def _parse_action(self, answer):
        return "up"

    def _step(self, action):
        self.n += 1
        return StepOutcome(self._render(), 1, self.n >= 2, effective=True, success=self.n >= 2)

    def _render(self):
        return f"n={self.n}"

    def action_candidates(self):
        return ["up"]

    def _get_state(self):
        return {"n": self.n}

    def _set_state(self, state):
        self.n = state["n"]
"""


def _problems(value: Any, tp: Any, where: str) -> list[str]:
    """Where ``value`` strays from the TypedDict ``tp`` (missing, undeclared or reordered keys)."""
    if get_origin(tp) in (Union, types.UnionType):
        options = [_problems(value, arg, where) for arg in get_args(tp)]
        return [] if any(not p for p in options) else min(options, key=len)
    if get_origin(tp) is list:
        return [p for i, item in enumerate(value) for p in _problems(item, get_args(tp)[0], f"{where}[{i}]")]
    if not is_typeddict(tp):
        return []
    if not isinstance(value, dict):
        return [f"{where}: {type(value).__name__}, not a {tp.__name__} object"]
    hints = get_type_hints(tp, include_extras=True)
    required = [k for k, h in hints.items() if get_origin(h) is not NotRequired]
    out = [f"{where}: {tp.__name__} lacks {k!r}" for k in required if k not in value]
    out += [f"{where}: {k!r} is not declared in {tp.__name__}" for k in value if k not in hints]
    if [k for k in value if k in hints] != [k for k in hints if k in value]:
        out.append(f"{where}: keys {list(value)} are not in {tp.__name__}'s order {list(hints)}")
    plain = get_type_hints(tp)
    for k, v in value.items():
        if k in plain:
            out += _problems(v, plain[k], f"{where}.{k}")
    return out


def _declared(spec: dict[str, Any]) -> dict[tuple[str, str], Any]:
    """``(METHOD, path template) -> TypedDict`` of every route whose success answer is JSON, from the OpenAPI."""
    out = {}
    for path, ops in spec["paths"].items():
        for method, op in ops.items():
            for code, answer in op["responses"].items():
                schema = answer.get("content", {}).get("application/json", {}).get("schema")
                if code.startswith("2") and schema is not None:
                    assert "$ref" in schema, f"{method.upper()} {path} declares no response model"
                    out[method.upper(), path] = getattr(responses, schema["$ref"].rsplit("/", 1)[-1])
    return out


def test_every_json_route_declares_a_response_model(dev_client: TestClient) -> None:
    spec = dev_client.get("/openapi.json").json()
    declared = _declared(spec)
    assert len(declared) >= 25 and all(is_typeddict(tp) for tp in declared.values())
    assert declared["POST", "/v1/sessions/{session_id}/step"] is responses.StepResult
    assert "reward" in spec["components"]["schemas"]["StepResult"]["properties"]


def test_answers_carry_exactly_the_declared_keys(dev_client: TestClient) -> None:
    c = dev_client
    declared = _declared(c.get("/openapi.json").json())
    routes = {key: re.compile("^" + re.sub(r"\{[^}]+\}", "[^/]+", key[1]) + "$") for key in declared}
    seen: set[tuple[str, str]] = set()

    def check(resp: Any) -> Any:
        assert resp.status_code < 300, resp.text
        method, path = resp.request.method, resp.request.url.path
        key = next(k for k, rx in routes.items() if k[0] == method and rx.match(path))
        assert not _problems(resp.json(), declared[key], f"{method} {path}")
        seen.add(key)
        return resp.json()

    check(c.get("/v1/health"))
    check(c.get("/v1/envs"))
    check(c.get("/v1/envs/FrozenLake-v0"))
    upload = {"source_b64": base64.b64encode(COUNTER).decode(), "source_name": "ctr.py", "tags": ["t"]}
    check(c.post("/v1/envs", json={"id": "Ctr-v0", "kind": "source", "entry_point": "ctr:Counter", **upload}))
    sb = check(c.post("/v1/sandboxes", json={"memory_mb": 128}))["id"]
    check(c.get("/v1/sandboxes"))
    check(c.get(f"/v1/sandboxes/{sb}"))
    check(c.post(f"/v1/sandboxes/{sb}/exec", json={"cmd": "echo hi"}))
    check(c.put(f"/v1/sandboxes/{sb}/files", params={"path": "a.txt"}, content=b"x"))
    check(c.post(f"/v1/sandboxes/{sb}/restart"))
    sid = check(c.post("/v1/sessions", json={"env": "FrozenLake-v0"}))["id"]
    ctr = check(c.post("/v1/sessions", json={"env": "dev/Ctr-v0"}))["id"]  # in the dev principal's namespace
    check(c.get("/v1/sessions"))
    check(c.get(f"/v1/sessions/{sid}"))
    check(c.post(f"/v1/sessions/{sid}/reset", json={"seed": 1}))
    check(c.post(f"/v1/sessions/{ctr}/reset", json={}))
    check(c.post(f"/v1/sessions/{ctr}/step", json={"action": "up"}))
    check(c.post(f"/v1/sessions/{sid}/step", json={"action": "<answer>Right</answer>"}))
    batch = [{"id": sid, "action": "<answer>Down</answer>"}, {"id": ctr, "op": "reset"}, {"id": "nope"}]
    check(c.post("/v1/sessions/step", json={"steps": batch}))
    check(c.get(f"/v1/sessions/{sid}/actions"))
    state = check(c.get(f"/v1/sessions/{sid}/state"))
    check(c.put(f"/v1/sessions/{sid}/state", json=state))
    check(c.post(f"/v1/sessions/{sid}/fork"))
    check(c.post(f"/v1/sessions/{sid}/token"))
    secret = c.app.state.rr.nodes._secret  # the random cluster secret of a server started without one
    node = {"endpoint": "http://127.0.0.1:9", "capacity": 4}
    check(c.put("/v1/nodes/n1", json=node, headers={"Authorization": f"Bearer {secret}"}))
    check(c.get("/v1/nodes"))
    check(c.post("/v1/nodes/n1/lost", json={"reason": "gone"}, headers={"Authorization": f"Bearer {secret}"}))
    job = check(c.post("/v1/jobs", json={"kind": "eval", "config": {"env": "FrozenLake-v0", "episodes": 100_000}}))
    check(c.get("/v1/jobs"))
    check(c.get(f"/v1/jobs/{job['id']}"))
    assert check(c.get(f"/v1/jobs/{job['id']}/metrics"))["job_id"] == job["id"]
    check(c.post(f"/v1/jobs/{job['id']}/cancel"))
    c.app.state.rr.alerts.tick()  # node n1 is lost: its alert fires now
    assert "node_lost:n1" in {a["key"] for a in check(c.get("/v1/alerts"))["alerts"]}
    overview = check(c.get("/v1/overview"))
    assert "node_lost:n1" in {a["key"] for a in overview["alerts"]}
    assert overview["restarts"][0]["sandbox_id"] == sb and overview["summary"]["sandboxes"] >= 1
    assert set(declared) <= seen, f"not exercised: {set(declared) - seen}"


def test_env_views_are_written_in_declared_order() -> None:
    order = [k for k in get_type_hints(responses.EnvInfo) if k != "validation"]
    assert list(builtin_view(envhub.spec("FrozenLake-v0"))) == order
    custom = CustomEnv(env_id="me/Ctr-v0", kind="source", owner="me", entry_point="ctr:Counter", source=b"x")
    assert list(custom.public()) == order
