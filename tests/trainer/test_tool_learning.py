"""Multi-turn GRPO on a tool env learns: the tiny hermes model playing Lookup-v0 through its own calls.

A short warm start on the expert's calls teaches the tiny model the find / get / answer turns in
``<tool_call>`` JSON, written token by token, but sampled at temperature 1 most of its calls are still
malformed, and each costs the env's format penalty. GRPO on 4 fixed questions (groups of 8) then raises the
share of parseable calls clearly over its first steps. The success claim, held-out and on several seeds from a
copy-pretrained model, is bench/learning/tool_learning.py's (bench/REPORT.md): at this test's size the
model cannot copy the number from a record, so success stays near 0.
"""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")


@pytest.mark.slow
def test_multiturn_grpo_on_tool_calls_raises_the_parseable_call_rate(tmp_path: Path) -> None:
    from rockroll.agentrl.models.tiny import TinyModelConfig, build_tiny_model
    from rockroll.trainer.config_io import config_from_dict
    from rockroll.trainer.pipeline import run_training
    from rockroll.trainer.run.metrics import read_metrics

    torch.set_num_threads(1)
    model = build_tiny_model(
        tmp_path / "tiny", TinyModelConfig(chat_template="hermes", env_ids=("Lookup-v0",), answer_tokens=False,
                                           episodes_per_env=20, vocab_size=1024)
    )  # fmt: skip
    cfg = config_from_dict(
        {
            "name": "learn_tools",
            "seed": 0,
            "total_steps": 30,
            "torch_threads": 1,
            "model": {"path": str(model)},
            "rollout": {
                "env_id": "Lookup-v0",
                "env_kwargs": {"difficulty": 1},
                "mode": "multiturn",
                "train_seeds": 4,
                "eval_seed_offset": 0,
                "eval_episodes": 4,
                "eval_every": 0,
                "episode": {
                    "history": "full",
                    "system_prompt": "none",
                    "tool_call_parser": "hermes",
                    "max_turns": 4,
                    "max_tokens_per_turn": 40,
                    "max_invalid_actions": 2,
                },
                "scheduler": {"group_size": 8, "num_env_groups": 4},
            },  # fmt: skip
            "optim": {"lr": 3e-4, "micro_batch_size": 64},
            "sft": {"steps": 150, "lr": 1e-3, "batch_size": 8, "num_demos": 200},
            "logging": {"run_dir": str(tmp_path), "progress": False, "tensorboard": False},
        }
    )
    run_training(cfg)
    rows = [r for r in read_metrics(tmp_path / "learn_tools") if r["step"] >= 0]
    rate = [r["rollout/tools/parseable_call_rate"] for r in rows]
    first, last = sum(rate[:10]) / 10, sum(rate[-10:]) / 10
    print(f"sampled parseable-call rate first 10 steps {first:.3f}, last 10 {last:.3f}")
    assert len(rows) == 30 and last >= first + 0.1 and last >= 1.3 * first
