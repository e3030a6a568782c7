"""The stateful part of the two-owner fuzz: schemathesis's state machine walks OpenAPI links.

Called by ``bench/security/owner_fuzz.py`` (``--stateful-cases``, ``--stateful-seconds``) on the server it
started and the resources it seeded. Each scenario of ``schema.as_state_machine()`` has one
*creator* (alice and bob take turns); the other owner is the *attacker*. The links are the ones
schemathesis infers (Location headers and dependency analysis: create sandbox -> show / exec /
files / restart / delete; create session -> show / reset / step / fork / state / delete; create
job -> show / metrics / logs / cancel; register env -> show / delete) plus two it cannot infer,
added to this fuzz's copy of the spec: a registered env -> open a session on it, and an opened
session -> show its sandbox.

Every step is sent with the creator's token. Whenever the request names a resource the creator
made in this run (or one seeded for it), the same request is first replayed with the attacker's
token, while the resource is alive: that answer must be a 404 (its status is tallied). Every
answer, the creator's and the attacker's, is judged alike: a 5xx is a server error; a 2xx to a
request naming the other owner's resource, or an answer carrying any of the other owner's ids or
secrets that the request did not send, is a cross-owner answer. Each scenario ends by deleting
what its creator made.

To let chains start, this fuzz's copy of the spec narrows three request bodies to values that can
succeed: a session's ``env`` is one of ``FrozenLake-v0`` and both owners' seeded custom envs (so a
creator also asks for the other owner's env, which must fail), a registered env is an
``entry_point`` env of FrozenLake, and a job is a small policy eval. Invalid bodies still come from
the negative mode of the state machine (about one step in ten) and from the stateless part.
"""

from __future__ import annotations

import copy
import json
import time
from typing import Any

import requests

BUILTIN_ENV = "FrozenLake-v0"
ENTRY_POINT = "rockroll.envs.frozenlake.env:FrozenLakeEnv"


class _Budget(Exception):
    """The stateful run spent its cases or its seconds."""


def fuzz_spec(spec: dict[str, Any], env_ids: list[str]) -> dict[str, Any]:
    """A copy of the app's spec with bodies narrowed to values that can succeed and the two links added."""
    spec = copy.deepcopy(spec)
    schemas = spec["components"]["schemas"]
    schemas["SessionCreate"]["properties"]["env"]["enum"] = [BUILTIN_ENV, *env_ids]
    sandbox = schemas["SandboxCreate"]["properties"]
    for field, cap in (("cpus", 1), ("memory_mb", 512), ("pids_limit", 256), ("workspace_mb", 256)):
        sandbox[field]["maximum"] = cap
    sandbox["network"]["enum"] = [False]
    sandbox["ttl_s"] = {"type": "number", "exclusiveMinimum": 0, "maximum": 600}
    execs = schemas["ExecRequest"]["properties"]
    execs["timeout_s"]["maximum"] = 5
    execs["max_output"]["maximum"] = 100_000
    env = schemas["EnvCreate"]["properties"]
    env["id"]["pattern"] = r"^[A-Za-z][A-Za-z0-9_.]*-v\d+$"  # the caller's own namespace
    env["kind"]["enum"] = ["entry_point"]
    env["entry_point"]["enum"] = [ENTRY_POINT]
    env["source_b64"] = {"type": "null"}
    env["kwargs"]["maxProperties"] = 0
    policy = copy.deepcopy(schemas["PolicyEvalConfig"])
    policy["properties"]["env"]["enum"] = [BUILTIN_ENV, *env_ids]
    policy["properties"]["episodes"]["maximum"] = 2
    policy["properties"]["kwargs"]["maxProperties"] = 0
    schemas["FuzzPolicyEval"] = policy
    job = schemas["JobCreate"]
    job["properties"]["kind"]["enum"] = ["eval"]
    job["properties"]["config"] = {"$ref": "#/components/schemas/FuzzPolicyEval"}
    job["required"] = ["kind", "config"]
    paths = spec["paths"]
    # the token is always sent: negative cases that drop it only measure the 401 (done by the stateless part)
    for ops in paths.values():
        for op in ops.values():
            if isinstance(op, dict):
                op.pop("security", None)
    paths["/v1/envs"]["post"]["responses"]["201"].setdefault("links", {})["OpenSessionOnEnv"] = {
        "operationId": paths["/v1/sessions"]["post"]["operationId"],
        "requestBody": {"env": "$response.body#/id"},
    }
    paths["/v1/sessions"]["post"]["responses"]["201"].setdefault("links", {})["ShowSessionSandbox"] = {
        "operationId": paths["/v1/sandboxes/{sandbox_id}"]["get"]["operationId"],
        "parameters": {"path.sandbox_id": "$response.body#/sandbox_id"},
    }
    return spec


def _ids_in(body: Any) -> list[str]:
    """The resource ids an answer names at its top level (``id``, ``sandbox_id``)."""
    if not isinstance(body, dict):
        return []
    return [v for k, v in body.items() if k in ("id", "sandbox_id") and isinstance(v, str) and len(v) >= 6]


class _Run:
    """Shared state of one stateful run: tokens, secrets per owner, tallies, budget."""

    def __init__(self, url: str, tokens: dict[str, str], seeded: dict[str, dict[str, Any]], cases: int, seconds: float):
        self.url = url
        self.headers = {o: {"Authorization": f"Bearer {t}"} for o, t in tokens.items()}
        self.secrets = {o: {str(v) for v in s.values() if v} for o, s in seeded.items()}
        self.max_cases = cases
        self.deadline = time.monotonic() + seconds
        self.scenarios = 0
        self.echoed: dict[str, set[str]] = {o: set() for o in tokens}  # the other's ids each owner has sent
        self.foreign_jobs: list[tuple[str, str, list[str]]] = []  # (owner, job id, the other's ids it names)
        self.spent = False  # once set, hypothesis's replays of the stopping scenario stop at once too
        self.tally: dict[str, Any] = {
            "cases": 0,
            "steps": 0,
            "replays": 0,
            "steps_naming_own": 0,
            "scenarios": 0,
            "server_errors": 0,
            "cross_owner": 0,
            "statuses": {},
            "replay_statuses": {},
            "replay_not_404": [],  # the attacker's answers other than 404 (a 2xx is judged above), as samples
            "operations": {},
            "created": {},
            "problems": [],
            "stopped_by": "max_examples",
            "restarts": 0,
            "flaky_restarts": 0,
        }

    def other(self, owner: str) -> str:
        return next(o for o in self.headers if o != owner)

    def check_budget(self) -> None:
        if self.spent:
            raise _Budget
        if self.tally["steps"] >= self.max_cases:
            self.tally["stopped_by"] = "cases"
            self.spent = True
        elif time.monotonic() > self.deadline:
            self.tally["stopped_by"] = "seconds"
            self.spent = True
        if self.spent:
            raise _Budget

    def send(self, case: Any, caller: str, replay: bool) -> Any:
        """Send ``case`` as ``caller`` and judge the answer; returns the response."""
        resp = case.call(headers=self.headers[caller], timeout=60)
        t = self.tally
        t["cases"] += 1
        t["replays" if replay else "steps"] += 1
        code = resp.status_code
        key = "replay_statuses" if replay else "statuses"
        t[key][str(code)] = t[key].get(str(code), 0) + 1
        row = t["operations"].setdefault(f"{case.method} {case.path}", {})
        row[str(code)] = row.get(str(code), 0) + 1
        sent = json.dumps([case.path_parameters, case.query, case.body], default=str)
        label = f"stateful {caller}{' (replay)' if replay else ''}: {case.method} {case.formatted_path} -> {code}"
        if replay and code != 404 and len(t["replay_not_404"]) < 30:
            t["replay_not_404"].append(f"{case.method} {case.path} -> {code}: {resp.text[:160]}")
        if code >= 500:
            t["server_errors"] += 1
            t["problems"].append(f"{label}: {resp.text[:200]}")
        theirs = self.secrets[self.other(caller)]
        named = [s for s in theirs if s in sent]
        self.echoed[caller].update(named)
        # a job that names another's env is refused when it runs, not when it is queued: see foreign_jobs
        if named and 200 <= code < 300 and case.method == "POST" and case.path == "/v1/jobs":
            self.foreign_jobs.append((caller, resp.json().get("id", ""), named))
        elif named and 200 <= code < 300:
            t["cross_owner"] += 1
            t["problems"].append(f"{label}: names {named} of the other owner and got {code}")
        # the caller's own earlier input (a job config naming the other's env) may come back to it
        leaked = [s for s in theirs if s in resp.text and s not in sent and s not in self.echoed[caller]]
        if leaked:
            t["cross_owner"] += 1
            t["problems"].append(f"{label}: carries {leaked}")
        return resp


def _machine(schema: Any, run: _Run) -> type:
    """The state machine class of ``schema`` with two owners: steps as the creator, replays as the attacker."""
    base = schema.as_state_machine()

    class TwoOwners(base):  # type: ignore[misc, valid-type]
        def setup(self) -> None:
            owners = sorted(run.headers)
            self.creator = owners[run.scenarios % len(owners)]
            run.scenarios += 1
            run.tally["scenarios"] = run.scenarios
            self.made: list[tuple[str, str]] = []

        def call(self, case: Any, **kwargs: Any) -> Any:
            run.check_budget()
            mine = run.secrets[self.creator]
            sent = json.dumps([case.path_parameters, case.query, case.body], default=str)
            if any(s in sent for s in mine):
                run.tally["steps_naming_own"] += 1
                run.send(case, run.other(self.creator), replay=True)
            resp = run.send(case, self.creator, replay=False)
            if 200 <= resp.status_code < 300 and case.method == "POST":
                try:
                    body = resp.json()
                except ValueError:
                    body = None
                ids = _ids_in(body)
                mine.update(ids)
                kind = case.path.split("/")[2] if case.path.count("/") >= 2 else ""
                if ids and (
                    case.path in ("/v1/sandboxes", "/v1/sessions", "/v1/envs", "/v1/jobs") or "fork" in case.path
                ):
                    self.made.append((kind, ids[0]))
                    run.tally["created"][kind] = run.tally["created"].get(kind, 0) + 1
            return resp

        def validate_response(self, response: Any, case: Any, *args: Any, **kwargs: Any) -> None:
            """Judged in ``call``: schemathesis's own checks (schema conformance) are the stateless fuzz's job."""

        def teardown(self) -> None:
            headers = run.headers[self.creator]
            for kind, rid in reversed(self.made):
                path = f"{run.url}/v1/{kind}/{rid}" + ("/cancel" if kind == "jobs" else "")
                try:
                    (requests.post if kind == "jobs" else requests.delete)(path, headers=headers, timeout=60)
                except requests.RequestException:
                    pass
            super().teardown()

    return TwoOwners


def run_stateful(
    url: str,
    tokens: dict[str, str],
    seeded: dict[str, dict[str, Any]],
    cases: int,
    seconds: float,
    scenario_steps: int = 12,
    max_restarts: int = 50,
) -> dict[str, Any]:
    """Run the two-owner state machine until ``cases`` generated cases (creator steps; the attacker's replays come
    on top) or ``seconds``; returns the tallies."""
    import schemathesis
    from hypothesis import HealthCheck, Phase, settings
    from hypothesis.errors import Flaky

    spec = requests.get(f"{url}/openapi.json", timeout=30).json()
    env_ids = sorted(str(s["name"]) for s in seeded.values())
    schema = schemathesis.openapi.from_dict(fuzz_spec(spec, env_ids))
    schema.location = f"{url}/openapi.json"
    run = _Run(url, tokens, seeded, cases, seconds)
    machine = _machine(schema, run)
    run.tally["links"] = sum(len(t.outgoing) for t in machine._transitions.operations.values())
    run.tally["rules"] = len(machine.rules()) if hasattr(machine, "rules") else None
    t0 = time.monotonic()
    # Hypothesis may stop a run as flaky: the API's state, not only its draws, decides what a step can
    # follow. The run then starts again (fresh draws, same server, same tallies) until the budget is spent.
    while not run.spent and run.tally["restarts"] < max_restarts:
        try:
            machine.run(
                settings=settings(
                    max_examples=100_000,
                    stateful_step_count=scenario_steps,
                    deadline=None,
                    database=None,
                    derandomize=False,
                    phases=[Phase.generate],
                    suppress_health_check=list(HealthCheck),
                )
            )
            break
        except KeyboardInterrupt:
            raise
        except BaseException as e:  # noqa: BLE001 - the budget ends the run from inside hypothesis
            if run.spent or _caused_by_budget(e):
                break
            run.tally["restarts"] += 1
            why = f"{type(e).__name__}: {str(e).strip().splitlines()[0][:200] if str(e).strip() else ''}"
            if isinstance(e, Flaky):
                run.tally["flaky_restarts"] += 1
            else:  # anything else (a request that timed out, a bug here) is reported
                run.tally["problems"].append(f"stateful run stopped and restarted: {why}")
            run.tally["stopped_by"] = why
    run.tally["wall_s"] = round(time.monotonic() - t0, 1)
    run.tally["foreign_jobs"] = _judge_foreign_jobs(run)
    run.tally["problems"] = run.tally["problems"][:50]
    return run.tally


def _judge_foreign_jobs(run: _Run, wait_s: float = 90) -> dict[str, Any]:
    """Jobs queued naming the other owner's env must fail when they run; a succeeded one is a cross-owner use."""
    counts: dict[str, Any] = {
        "queued": len(run.foreign_jobs),
        "failed_or_cancelled": 0,
        "succeeded": 0,
        "unfinished": 0,
    }
    deadline = time.monotonic() + wait_s
    errors: set[str] = set()
    for owner, job_id, named in run.foreign_jobs:
        state, error = "?", ""
        while True:
            try:
                r = requests.get(f"{run.url}/v1/jobs/{job_id}", headers=run.headers[owner], timeout=30)
                state = r.json().get("state", "?") if r.status_code == 200 else f"http {r.status_code}"
                error = r.json().get("error", "") if r.status_code == 200 else ""
            except (requests.RequestException, ValueError):
                state = "?"
            if state not in ("queued", "running") or time.monotonic() > deadline:
                break
            time.sleep(1)
        if state == "succeeded":
            counts["succeeded"] += 1
            run.tally["cross_owner"] += 1
            run.tally["problems"].append(f"stateful {owner}: job {job_id} naming {named} of the other owner succeeded")
        elif state in ("queued", "running", "?"):
            counts["unfinished"] += 1
        else:
            counts["failed_or_cancelled"] += 1
            errors.add(error[:200])
    counts["errors"] = sorted(errors)[:5]  # why they failed (the same words as for an env that does not exist)
    return counts


def _caused_by_budget(e: BaseException) -> bool:
    seen: list[BaseException] = [e]
    while seen:
        x = seen.pop()
        if isinstance(x, _Budget):
            return True
        seen += [c for c in (x.__cause__, x.__context__) if c is not None]
        seen += list(getattr(x, "exceptions", []) or [])
    return False
