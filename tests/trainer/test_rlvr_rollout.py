"""The RLVR rollout (trainer/rollout/rlvr.py) with a scripted engine, real rewards and a JSONL dataset.

The engine answers by the prompt: rows marked ``easy`` are always right, ``hard`` always wrong, the
others right on every other answer of a group (and held-out row); ``long`` rows run into the token cap. Rewards are the real router
(``exact`` on ``\\boxed{}``), plus a reward that fails on some answers (an infra failure).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from rockroll.agentrl.engines.base import GenerationResult
from rockroll.agentrl.models.char_tokenizer import CharTokenizer
from rockroll.agentrl.rewards import DatasetRowError, RewardRouter
from rockroll.agentrl.rewards.base import Reward
from rockroll.envs.config import ConfigError
from rockroll.trainer.config_io import config_from_dict
from rockroll.trainer.rollout.rlvr import RLVRRollout


class Scripted:
    """An engine whose answers follow the prompt (see the module docstring)."""

    restarts = 0

    def __init__(self, tok: CharTokenizer) -> None:
        self.tok, self.calls = tok, 0

    async def generate_batch(self, reqs: list[Any]) -> list[GenerationResult]:
        self.calls += 1
        out = []
        for req in reqs:
            prompt = self.tok.decode(req.prompt_ids)
            answer = prompt.split("ANSWER=")[1].split(" ")[0]
            i = int(re.search(r"(\d+)$", req.request_id).group(1))  # the answer's index in its group (eval: row)
            right = "easy" in prompt or ("hard" not in prompt and i % 2 == 0)
            text = f"\\boxed{{{answer if right else 'x'}}}"
            if "long" in prompt:
                ids = self.tok.encode(text + " and more")[: req.params.max_new_tokens]
                out.append(GenerationResult(ids, [-1.0] * len(ids), "length", 0))
                continue
            ids = self.tok.encode(text) + [self.tok.eos_token_id]
            out.append(GenerationResult(ids, [-1.0] * len(ids), "stop", 0))
        return out

    def update_weights(self, weights: Any, version: int) -> None:
        pass

    async def close(self) -> None:
        pass


class Flaky(Reward):
    """Fails (an infra failure) on wrong answers, scores right ones 1."""

    def __call__(self, prompt: str, response: str, metadata: Any) -> float:
        if "{x}" in response:
            raise ConnectionError("grader unreachable")
        return 1.0


def rows(kind: str, n: int, tag: str = "ex", start: int = 0) -> list[dict[str, Any]]:
    return [{"prompt": f"{kind} q{i} ANSWER={i} ", "answer": str(i), "tag": tag} for i in range(start, start + n)]


def write(path: Path, data: list[dict[str, Any]]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in data))
    return str(path)


def make(tmp_path: Path, train: list[dict], heldout: list[dict], *, router: Any = None, **rlvr: Any) -> RLVRRollout:
    routes = {"ex": {"reward": "exact", "options": {"extract": "boxed"}}, "flaky": {"reward": "exact"}}
    rollout_extra = rlvr.pop("rollout", {})
    dataset_extra = rlvr.pop("dataset", {})
    top = rlvr.pop("top", {})
    cfg = config_from_dict(
        {
            **top,
            "seed": 0,
            "rollout": {
                "mode": "rlvr",
                "eval_episodes": len(heldout),
                "episode": {"max_tokens_per_turn": 12, "max_retries": 0},
                "scheduler": {"group_size": 2, "num_env_groups": 2, "group_size_redundancy": 1},
                "rlvr": {
                    "dataset": {
                        "source": "jsonl",
                        "path": write(tmp_path / "train.jsonl", train),
                        "heldout_path": write(tmp_path / "heldout.jsonl", heldout),
                        "demo_template": "\\boxed{{{answer}}}",
                        **dataset_extra,
                    },
                    "rewards": {"routes": routes},
                    **rlvr,
                },
                **rollout_extra,
            },
        }
    )
    tok = CharTokenizer()
    router = router or RewardRouter(cfg.rollout.rlvr.rewards, rewards={"flaky": Flaky()})
    return RLVRRollout(cfg, tok, Scripted(tok), router=router)


def groups(trajs: list[Any]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for t in trajs:
        out.setdefault(t.group_id, []).append(t)
    return out


@pytest.mark.parametrize("chunks", [1, 2, 64])
def test_a_batch_holds_groups_with_a_signal(tmp_path: Path, chunks: int) -> None:
    train = rows("hard", 6) + rows("mid", 2, start=6) + rows("easy", 4, start=8)
    ro = make(tmp_path, train, rows("mid", 2, start=50), max_sampling_tries=16, overlap_chunks=chunks)
    try:
        trajs, m = ro.next_batch(0)
        assert ro.engine.calls == m["rollout/sampling_tries"] * chunks if chunks < 64 else m["rollout/groups_drawn"]
        by_group = groups(trajs)
        assert len(by_group) == 2 and all(len(g) == 2 for g in by_group.values())
        for members in by_group.values():  # every group kept teaches: one right, one wrong
            assert sorted(t.final_reward for t in members) == [0.0, 1.0]
            assert all("mid" in ro.train[t.seed].prompt for t in members)
        assert m["rollout/groups_kept"] == 2 and m["reward/ex/count"] > 0 and m["rollout/groups_uniform"] > 0
        assert m["rollout/sampling_tries"] >= 1 and 0 < m["rollout/kept_share"] <= 1
        again, _ = ro.next_batch(0)  # the same step draws the same rows
        assert [t.seed for t in again] == [t.seed for t in trajs]
    finally:
        ro.close()


def test_reward_failures_mask_the_answer_never_a_zero(tmp_path: Path) -> None:
    ro = make(tmp_path, rows("mid", 4, tag="flaky"), rows("mid", 2, tag="flaky", start=50), max_sampling_tries=2)
    try:
        ro.plan = type(ro.plan)(2, 2, oversample=1.0, max_tries=2, dynamic=False)
        trajs, m = ro.next_batch(0)
        assert m["reward/flaky/infra_failures"] > 0 and m["rollout/answers_masked"] > 0
        assert all(not t.masked and t.final_reward == 1.0 for t in trajs)  # the failed ones never come back as 0
        ev = ro.evaluate([ro.cfg.rollout.eval_seed_offset + i for i in range(2)])
        assert ev["eval/flaky/masked"] == 1 and ev["eval/flaky/success"] == 1.0  # the masked one is left out
    finally:
        ro.close()


@pytest.mark.parametrize("overlong", ["filter", "penalty", "none"])
def test_overlong_answers(tmp_path: Path, overlong: str) -> None:
    # filter: 2 of 4 rows run long, and each draw of 3 rows holds one; else every row runs long
    train = rows("long mid", 2) + rows("mid", 2, start=2) if overlong == "filter" else rows("long mid", 3)
    ro = make(tmp_path, train, rows("mid", 2, start=50), overlong=overlong, overlong_penalty=0.5, max_sampling_tries=8)
    try:
        trajs, m = ro.next_batch(0)
        cut = [t for t in trajs if t.turns[0].finish_reason == "length"]
        assert m["rollout/overlong_share"] > 0 and len(trajs) == 4
        if overlong == "filter":
            assert cut == []
        elif overlong == "penalty":  # a cut answer's score (1 or 0) minus the penalty
            assert len(cut) == 4 and {t.final_reward for t in cut} == {0.5, -0.5}
        else:
            assert len(cut) == 4 and {t.final_reward for t in cut} == {1.0, 0.0}
    finally:
        ro.close()


def test_evaluation_reads_held_out_rows_per_tag(tmp_path: Path) -> None:
    heldout = rows("easy", 3, start=50) + rows("hard", 1, tag="flaky", start=60) + rows("easy", 2, start=70)
    train = rows("mid", 4) + rows("mid", 2, tag="flaky", start=10)
    ro = make(tmp_path, train, heldout, rollout={"select_episodes": 2, "eval_episodes": 4})
    try:
        r = ro.cfg.rollout
        assert ro.tags == ["ex", "flaky"]
        ev = ro.evaluate([r.eval_seed_offset + i for i in range(4)])
        assert ev["eval/ex/success"] == 1.0 and ev["eval/ex/n"] == 3
        assert ev["eval/flaky/masked"] == 1 and ev["eval/flaky/n"] == 1  # its only answer failed as infra
        from rockroll.trainer.evaluation.selection import select_seeds

        sel = ro.evaluate(select_seeds(ro.cfg), "select")  # validation rows come after the evaluated ones
        assert sel["select/ex/n"] == 2 and "select/flaky/n" in sel
    finally:
        ro.close()


def test_demos_are_the_rows_answers(tmp_path: Path) -> None:
    ro = make(tmp_path, rows("mid", 3), rows("mid", 1, start=50))
    try:
        demos = ro.demos(2)
        tok = ro.tok
        assert len(demos) == 2
        response = [i for i, keep in zip(demos[1].input_ids, demos[1].response_mask, strict=True) if keep]
        assert tok.decode(response) == "\\boxed{1}<|im_end|>"
    finally:
        ro.close()


def test_load_time_errors_name_the_row_or_the_key(tmp_path: Path) -> None:
    bad = rows("mid", 3)
    del bad[1]["answer"]
    with pytest.raises(DatasetRowError, match=r"train.jsonl: row 1: tag 'ex' needs answer") as e:
        make(tmp_path, bad, rows("mid", 1, start=50))
    assert e.value.row == 1 and e.value.missing == ("answer",)
    with pytest.raises(DatasetRowError, match="row 0: unknown reward tag 'nope'"):
        make(tmp_path, rows("mid", 2, tag="nope"), rows("mid", 1, start=50))
    with pytest.raises(
        ConfigError, match=r"rollout.eval_episodes \(2\) \+ rollout.select_episodes \(1\).*holds 2"
    ) as c:
        make(tmp_path, rows("mid", 2), rows("mid", 2, start=50), rollout={"select_episodes": 1, "eval_episodes": 2})
    assert c.value.key == "rollout.eval_episodes"
    with pytest.raises(DatasetRowError, match=r"row 0: the template '\{prompt\} \{hint\}' needs hint"):
        make(tmp_path, rows("mid", 2), rows("mid", 1, start=50), dataset={"prompt_template": "{prompt} {hint}"})


def test_a_dataset_without_a_demo_answer_cannot_warm_start(tmp_path: Path) -> None:
    ro = make(tmp_path, rows("mid", 2), rows("mid", 1, start=50))
    try:
        ro.rl.dataset.demo_template = ""
        with pytest.raises(ConfigError) as e:
            ro.demos(2)
        assert e.value.key == "rollout.rlvr.dataset.demo_template"
    finally:
        ro.close()
    # with a warm start asked for, a row the demo template cannot fill fails when the rollout is built
    with pytest.raises(DatasetRowError, match=r"warm start\): row 0: the template '\{solution\}' needs solution"):
        make(tmp_path, rows("mid", 2), rows("mid", 1, start=50), top={"sft": {"steps": 5}},
             dataset={"demo_template": "{solution}"})  # fmt: skip
