"""Plan-mode rollout: strict scoring, expert demos, and the same episodes through process sandboxes."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import uuid

import pytest

import rockroll.envhub as envhub
from rockroll.trainer.rollout.plan import PlanRollout, PlanTask, expert_plan, score_plan

FL = ("FrozenLake-v0", {"is_slippery": False})


def test_strict_scoring() -> None:
    env = envhub.make(*FL[:1], **FL[1])
    plan = expert_plan(*FL, seed=3)
    cases = [
        ("<answer>" + " ".join(plan) + "</answer>", 1.0),
        ("<answer>" + " ".join(plan + plan[-1:]) + "</answer>", 0.0),  # moves after the goal
        ("<answer>" + " ".join(plan[:-1]) + "</answer>", 0.0),  # stops short
        (" ".join(plan), 0.0),  # no answer block
        ("<answer>Jump</answer>", 0.0),
        ("<answer>" + " ".join(["Up"] * 9) + "</answer>", 0.0),  # longer than max_actions
    ]
    for text, reward in cases:
        env.reset(seed=3)
        assert score_plan(env, text, max_actions=8)[0] == reward, text


class ExpertEngine:
    """Answers every prompt with the expert's plan for the seed it was built for (a test double)."""

    def __init__(self, tok, plans: dict[tuple[int, ...], list[str]]) -> None:
        self.tok, self.plans = tok, plans

    async def generate_batch(self, reqs):
        from rockroll.agentrl.engines.base import GenerationResult

        out = []
        for r in reqs:
            ids = self.tok.encode(
                "<answer>" + " ".join(self.plans[tuple(r.prompt_ids)]) + "</answer>", add_special_tokens=False
            )
            out.append(GenerationResult(ids + [self.tok.eos_token_id], [-0.1] * (len(ids) + 1), "stop", 3))
        return out


def _play(rollout: PlanRollout, tok, seeds: list[int]):
    plans = {tuple(rollout.prompt_ids(s)): expert_plan(*FL, seed=s) for s in seeds}
    tasks = [PlanTask(s, f"g{s}", f"g{s}/0") for s in seeds]
    return asyncio.run(rollout.run(ExpertEngine(tok, plans), tasks, max_new_tokens=32, temperature=1.0))


@pytest.mark.slow
def test_expert_plans_win_in_process_and_in_process_sandboxes(tiny_model_dir, tmp_path) -> None:
    from rockroll.agentrl.models.tiny import load_tokenizer
    from rockroll.agentrl.sources.kinds import SandboxSource
    from rockroll.sandbox.manager import SandboxManager

    tok = load_tokenizer(tiny_model_dir)
    seeds = list(range(12))
    local = PlanRollout(*FL, tok, prompt_style="grid")
    trajs = _play(local, tok, seeds)
    assert all(t.success and t.final_reward == 1.0 for t in trajs)
    sample = trajs[0].to_samples()[0]
    assert sum(sample.response_mask) == len(trajs[0].turns[0].response_ids) and sample.weight_version == 3
    demo = local.demo(5)
    assert (
        demo is not None
        and tok.decode(demo[1], skip_special_tokens=True)
        == "<answer>" + " ".join(expert_plan(*FL, seed=5)) + "</answer>"
    )
    local.close()

    state = tempfile.mkdtemp(prefix="rr-", dir="/tmp")
    manager = SandboxManager(
        backend="process",
        name=f"tt{uuid.uuid4().hex[:8]}",
        db_url=f"sqlite:///{tmp_path}/sb.db",
        state_dir=state,
        monitor_interval_s=None,
    )
    try:
        source = SandboxSource(manager)
        remote = PlanRollout(*FL, tok, prompt_style="grid", source=source)
        trajs = _play(remote, tok, seeds)
        assert all(t.success for t in trajs), [t.seed for t in trajs if not t.success]
        assert source.opened == len(seeds) and source.open_count == 0
        remote.close()
    finally:
        manager.close()
        shutil.rmtree(state, ignore_errors=True)
