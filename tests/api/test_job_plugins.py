"""Issue 35, hole C: nothing a job config names is imported or resolved in the control plane.

An expert (``rollout.expert``, ``rollout.envs.N.expert``) is checked as text against the registered experts
and the env spec's own; a module it names is never imported by the server, and the answer is the same
whether or not such a module exists (no probing of what is installed).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from rockroll.api.jobs.configs import effective_config
from rockroll.api.jobs.paths import JobDirs
from rockroll.api.server.errors import ApiError

PROBES = ("this:s", "os:system", "nonexistent_mod:f", "rockroll.envs.alfworld.searcher:nope")


def _train(expert: str, *, mixed: bool = False) -> dict:
    rollout = {"envs": [{"env_id": "FrozenLake-v0", "expert": expert}]} if mixed else {"expert": expert}
    return {"kind": "train", "config": {"total_steps": 1, "rollout": rollout}}


@pytest.mark.parametrize("mixed", [False, True])
def test_an_expert_a_job_names_is_never_imported_by_the_server(dev_client: TestClient, mixed: bool) -> None:
    sys.modules.pop("this", None)  # `import this` prints the Zen of Python: it must not happen here
    assert dev_client.post("/v1/jobs", json=_train("x:y")).status_code == 422  # the route's own imports happen
    before = set(sys.modules)
    messages = []
    for probe in PROBES:
        r = dev_client.post("/v1/jobs", json=_train(probe, mixed=mixed))
        assert r.status_code == 422, r.text
        err = r.json()["error"]
        assert err["code"] == "job_plugin" and err["details"]["key"].endswith("expert"), err
        assert "not a registered expert" in err["message"] and "alfworld_searcher" in err["message"]
        messages.append(err["message"].replace(repr(probe), "X"))
    assert len(set(messages)) == 1, messages  # one answer whether the module exists or not
    assert not {"this", "nonexistent_mod"} & set(sys.modules)
    assert set(sys.modules) - before == set(), set(sys.modules) - before
    assert dev_client.get("/v1/jobs").json()["jobs"] == []  # nothing queued


def test_registered_and_declared_experts_pass_as_text(tmp_path: Path) -> None:
    dirs = JobDirs(tmp_path)
    owner_dir = dirs.ensure("alice")
    for env_id, expert in (
        ("ALFWorld-v0", "alfworld_searcher"),
        ("ALFWorld-v0", "rockroll.envs.alfworld.searcher:expert"),  # the text it was registered with
        ("FrozenLake-v0", "rockroll.envs.frozenlake.expert:expert"),  # the env spec's own
    ):
        config = {"rollout": {"env_id": env_id, "expert": expert}, "model": {"path": "m"}}
        assert effective_config("train", config, dirs=dirs, owner_dir=owner_dir)["rollout"]["expert"] == expert
    with pytest.raises(ApiError, match="not a registered expert") as e:  # another env's expert is not this one's
        effective_config(
            "train", {"rollout": {"expert": "rockroll.envs.webshop.oracle:expert"}}, dirs=dirs, owner_dir=owner_dir
        )
    assert e.value.status == 422
