"""Schemathesis with two owners' tokens: no server error, and no answer carries the other owner's data.

    .venv/bin/python bench/security/owner_fuzz.py [--examples 25] [--json bench/results/owner_fuzz.json]

A real ``rockroll serve`` (process backend) gets two ordinary owners, ``alice`` and ``bob``. Each
one first makes a session (reset and stepped), a sandbox holding a secret file, a private custom
env and a finished eval job. Then, for every operation of ``/openapi.json``, each owner in turn
attacks: schemathesis generates valid and invalid requests, and the path parameters of every case
are the *other* owner's ids (session, sandbox, job, env), so each case is a stateful cross-owner
attempt; the same operations run a second time with generated ids. A case fails when

* the answer is a 5xx;
* a request naming the other owner's resource gets a 2xx;
* the answer carries any of the other owner's ids or secrets that the request did not send.

Then the stateful part (``bench/security/owner_fuzz_stateful.py``) walks the spec's links with
schemathesis's state machine: one owner creates and uses resources, the other owner's token
replays each request that names them and must get 404.

At the end the victims' resources must be intact (the session still steps, the file reads back).
The last lines are ``cases: N, server errors: E, cross-owner answers: X`` for each part.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from rockroll.api.server.serve_proc import ServerProc, create_token, scratch_dir  # noqa: E402
from rockroll.client.sdk import Client  # noqa: E402

OWNERS = ("alice", "bob")
ENV_SOURCE = '''"""A private env of {owner}."""
from rockroll.envs.frozenlake.env import FrozenLakeEnv


class Secret{cap}(FrozenLakeEnv):
    """{marker}"""
'''


def seed_owner(c: Client, owner: str) -> dict[str, Any]:
    """One of each resource for ``owner``; returns its ids and the secrets no one else may read."""
    marker = f"SECRET-{owner.upper()}-{time.time_ns() % 10**9}"
    found: dict[str, Any] = {"marker": marker}
    sid = c.create_session("FrozenLake-v0")["id"]
    c.reset(sid, seed=7)
    c.step(sid, "Right")
    found["session_id"] = sid
    sb = c.create_sandbox()
    c.write_file(sb["id"], "secret.txt", marker)
    found["sandbox_id"] = sb["id"]
    src = scratch_dir(f"env-{owner}") / f"secret_{owner}.py"
    src.write_text(ENV_SOURCE.format(owner=owner, cap=owner.capitalize(), marker=marker))
    env = c.register_env(
        f"Secret{owner.capitalize()}-v0",
        kind="source",
        entry_point=f"secret_{owner}:Secret{owner.capitalize()}",
        source=src,
        description=marker,
    )
    found["name"] = env["id"]
    job = c.create_job("eval", {"env": "FrozenLake-v0", "episodes": 2, "policy": "expert"})
    c.wait_job(job["id"], timeout_s=120)
    found["job_id"] = job["id"]
    return found


def _secrets(victim: dict[str, Any]) -> list[str]:
    return [str(v) for v in victim.values() if v]


def _checker(
    tally: dict[str, Any],
    attacker: str,
    victim: dict[str, Any],
    targeted: list[str],
    use_victim_ids: bool,
    headers: dict[str, str],
    secrets: list[str],
) -> Any:
    """The body of one hypothesis test: send the case (with the victim's ids) and judge the answer."""

    def check(case: Any) -> None:
        if use_victim_ids:
            case.path_parameters = dict(case.path_parameters or {})
            for p in targeted:
                case.path_parameters[p] = victim[p]
        case.headers = {**(case.headers or {}), **headers}  # negative cases must not drop the token
        resp = case.call(headers=headers, timeout=60)
        tally["cases"] += 1
        code = resp.status_code
        tally["statuses"][str(code)] = tally["statuses"].get(str(code), 0) + 1
        sent = json.dumps([case.path_parameters, case.query, case.body], default=str)
        label = f"{attacker}: {case.method} {case.formatted_path} -> {code}"
        if code >= 500:
            tally["server_errors"] += 1
            tally["problems"].append(f"{label}: {resp.text[:200]}")
        if use_victim_ids and 200 <= code < 300:
            tally["cross_owner"] += 1
            tally["problems"].append(f"{label}: the other owner's resource answered")
            return
        leaked = [s for s in secrets if s in resp.text and s not in sent]
        if leaked:
            tally["cross_owner"] += 1
            tally["problems"].append(f"{label}: carries {leaked}")

    return check


def run_fuzz(url: str, tokens: dict[str, str], seeded: dict[str, dict[str, Any]], examples: int) -> dict[str, Any]:
    """Every operation, both modes, each owner against the other; returns the tallies and problems."""
    import schemathesis
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis.errors import Unsatisfiable
    from schemathesis import GenerationMode

    schema = schemathesis.openapi.from_url(f"{url}/openapi.json")
    operations = [r.ok() for r in schema.get_all_operations()]
    tally: dict[str, Any] = {"cases": 0, "server_errors": 0, "cross_owner": 0, "statuses": {}, "problems": []}
    for attacker, victim in (("alice", "bob"), ("bob", "alice")):
        headers = {"Authorization": f"Bearer {tokens[attacker]}"}
        secrets = _secrets(seeded[victim])
        for op in operations:
            params = re.findall(r"{(\w+)}", op.path)
            targeted = [p for p in params if p in seeded[victim]]
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
                for use_victim_ids in [True, False] if targeted else [False]:
                    check = _checker(tally, attacker, seeded[victim], targeted, use_victim_ids, headers, secrets)
                    run = settings(
                        max_examples=examples,
                        deadline=None,
                        database=None,
                        derandomize=True,
                        phases=[Phase.explicit, Phase.generate],
                        suppress_health_check=list(HealthCheck),
                    )(given(case=op.as_strategy(generation_mode=mode))(check))
                    try:
                        run()
                    except Unsatisfiable:
                        pass
    return tally


def intact(c: Client, seeded: dict[str, Any]) -> list[str]:
    """What of an owner's resources the fuzz broke (empty when all is well)."""
    broken = []
    try:
        c.step(seeded["session_id"], "Down")
    except Exception as e:  # noqa: BLE001 - any failure is the finding
        broken.append(f"session: {e}")
    try:
        if c.read_file(seeded["sandbox_id"], "secret.txt").decode() != seeded["marker"]:
            broken.append("sandbox file changed")
    except Exception as e:  # noqa: BLE001
        broken.append(f"sandbox: {e}")
    try:
        c.get_env(seeded["name"])
    except Exception as e:  # noqa: BLE001
        broken.append(f"env: {e}")
    return broken


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--examples", type=int, default=12, help="generated cases per operation, mode and owner")
    p.add_argument(
        "--stateful-cases", type=int, default=2000, help="stateful part: generated cases, replays on top (0: skip it)"
    )
    p.add_argument("--stateful-seconds", type=float, default=600, help="stateful part: most seconds")
    p.add_argument("--scenario-steps", type=int, default=12, help="stateful part: most steps per scenario")
    p.add_argument("--no-stateless", action="store_true", help="skip the stateless part")
    p.add_argument("--json", default=str(ROOT / "bench" / "results" / "owner_fuzz.json"))
    args = p.parse_args()
    srv = ServerProc(scratch_dir("ownerfuzz"), extra=["--max-sandboxes", "8", "--no-train-jobs"])
    tokens = {o: create_token(srv.db_url, o) for o in OWNERS}
    t0 = time.monotonic()
    try:
        srv.start()
        clients = {o: Client(srv.url, tokens[o]) for o in OWNERS}
        # the victims' resources are made again after the fuzz ran against them as attacker too
        seeded = {o: seed_owner(clients[o], o) for o in OWNERS}
        empty = {"cases": 0, "server_errors": 0, "cross_owner": 0, "statuses": {}, "problems": []}
        tally = empty if args.no_stateless else run_fuzz(srv.url, tokens, seeded, args.examples)
        tally["stateless_wall_s"] = round(time.monotonic() - t0, 1)
        # checked before the stateful part, whose creators may delete or restart their own seeded resources
        tally["broken"] = {o: intact(clients[o], seeded[o]) for o in OWNERS}
        if args.stateful_cases > 0:
            from bench.security.owner_fuzz_stateful import run_stateful

            tally["stateful"] = run_stateful(
                srv.url, tokens, seeded, args.stateful_cases, args.stateful_seconds, args.scenario_steps
            )
        for c in clients.values():
            c.close()
    finally:
        srv.cleanup()
    tally["wall_s"] = round(time.monotonic() - t0, 1)
    tally["problems"] = tally["problems"][:50]
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(tally, indent=2))
    for line in tally["problems"][:20]:
        print(line)
    print(f"answers by status: {sorted(tally['statuses'].items())}; victims' resources broken: {tally['broken']}")
    sf = tally.get("stateful")
    if sf:
        for line in sf["problems"][:20]:
            print(line)
        print(
            f"stateful: {sf['scenarios']} scenarios, {sf['steps']} steps + {sf['replays']} attacker replays "
            f"({sf['steps_naming_own']} steps named the creator's resources) in {sf['wall_s']} s; "
            f"replays by status: {sorted(sf['replay_statuses'].items())}; created: {sf['created']}"
        )
        print(
            f"stateful cases: {sf['steps']} generated + {sf['replays']} attacker replays = {sf['cases']} requests, "
            f"server errors: {sf['server_errors']}, "
            f"cross-owner answers: {sf['cross_owner']}"
        )
    print(
        f"cases: {tally['cases']}, server errors: {tally['server_errors']}, cross-owner answers: {tally['cross_owner']}"
    )


if __name__ == "__main__":
    main()
