"""Training with ``rollout.engine.kind: vllm`` through the real vLLM venv (skipped with its build status if absent).

The multi-turn learning test of tests/trainer/test_learning.py with the vLLM engine generating every
rollout and evaluation: the same warm start, maps, settings and bar (the sampled success of the last 10
steps at least 0.15 above the first 10). After every update the trainer's weights are synced to the
vLLM host; the engine's logprobs of the sampled tokens then match the trainer's recomputation
(``actor/logprob_gap_*``), which they could not with stale weights in the engine.
"""

from __future__ import annotations

import pytest

from tests.agentrl.vllm_venv import vllm_python
from tests.trainer.test_learning import multiturn_learning_config

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.slow


def test_multiturn_grpo_with_the_vllm_engine_raises_sampled_success(small_model_dir, tmp_path) -> None:
    from rockroll.trainer.pipeline import run_training
    from rockroll.trainer.run.metrics import read_metrics

    python = vllm_python()  # skip before any work where the venv was not built
    torch.set_num_threads(1)
    cfg = multiturn_learning_config(
        small_model_dir, tmp_path, "learn_mt_vllm",
        engine={"kind": "vllm", "python_executable": python, "dtype": "float32", "max_model_len": 512},
    )  # fmt: skip
    run_training(cfg)
    records = [r for r in read_metrics(tmp_path / "learn_mt_vllm") if r["step"] >= 0]
    train = [r["env/FrozenLake/success"] for r in records]
    first, last = sum(train[:10]) / 10, sum(train[-10:]) / 10
    gaps = [r["actor/logprob_gap_max"] for r in records if "actor/logprob_gap_max" in r]
    print(f"vllm: multi-turn sampled success first 10 steps {first:.3f}, last 10 {last:.3f}; gap max {max(gaps):.2e}")
    assert last >= first + 0.15
    assert records[-1]["system/weight_version"] >= 40  # weights went to the engine after (almost) every step
    assert gaps and max(gaps) < 1e-3  # the engine generated with the trainer's current weights
    assert sum(r.get("rollout/episodes_masked", 0.0) for r in records) == 0
