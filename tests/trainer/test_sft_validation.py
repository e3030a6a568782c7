"""``sft.eval_every`` validates the warm start on the validation seeds; ``sft.stop_success`` ends it at the first
validation that reaches the given success."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from rockroll.agentrl.trajectory import TrainSample  # noqa: E402
from rockroll.trainer.config import TrainConfig  # noqa: E402
from rockroll.trainer.learner.sft import sft_train  # noqa: E402

torch.set_num_threads(1)


class _Bigram(torch.nn.Module):
    def __init__(self, vocab: int) -> None:
        super().__init__()
        self.table = torch.nn.Embedding(vocab, vocab)
        self.config = type("C", (), {"model_type": "bigram"})()

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, use_cache: bool = False) -> object:
        return type("O", (), {"logits": self.table(input_ids)})()


def test_validate_runs_every_n_steps_in_eval_mode_and_can_stop_the_warm_start() -> None:
    rows = [TrainSample([3, 4, 5, 6], [0, 0, 1, 1], [0.0] * 4, 0.0, "g", "e", 0)]
    model = _Bigram(8)
    calls: list[tuple[int, bool]] = []

    def validate(done: int) -> bool:
        calls.append((done, model.training))
        return done >= 6

    m = sft_train(model, rows, steps=10, lr=1e-2, batch_size=2, validate=validate, validate_every=3)
    assert calls == [(3, False), (6, False)] and m["sft/steps"] == 6.0 and model.training
    calls.clear()
    m = sft_train(model, rows, steps=5, lr=1e-2, batch_size=2, validate=validate, validate_every=3)
    assert calls == [(3, False)] and m["sft/steps"] == 5.0


def test_the_settings_are_checked_together() -> None:
    with pytest.raises(ValueError, match="sft.stop_success needs sft.eval_every"):
        TrainConfig.model_validate({"sft": {"stop_success": 0.3}})
    with pytest.raises(ValueError, match="select_episodes"):
        TrainConfig.model_validate({"rollout": {"mode": "multiturn"}, "sft": {"eval_every": 10}})
    with pytest.raises(ValueError, match="stop_success"):
        TrainConfig.model_validate({"sft": {"eval_every": 10, "stop_success": 1.5}})


def test_a_run_validates_its_warm_start_and_stops_it(tiny_model_dir: Path, tmp_path: Path) -> None:
    from rockroll.trainer.config_io import config_from_dict
    from rockroll.trainer.pipeline import run_training
    from rockroll.trainer.run.metrics import read_metrics

    def cfg(name: str, stop: float | None) -> TrainConfig:
        return config_from_dict(
            {
                "name": name,
                "total_steps": 0,
                "model": {"path": str(tiny_model_dir)},
                "rollout": {"mode": "multiturn", "env_kwargs": {"is_slippery": False}, "eval_episodes": 4,
                            "select_episodes": 4, "episode": {"max_turns": 3, "max_tokens_per_turn": 8}},
                "sft": {"steps": 6, "num_demos": 8, "batch_size": 4, "eval_every": 2, "stop_success": stop},
                "logging": {"run_dir": str(tmp_path), "progress": False},
            }
        )  # fmt: skip

    full = run_training(cfg("full", None))
    assert [v["step"] for v in full["sft_val"]] == [2.0, 4.0, 6.0]
    assert all(0.0 <= v["success"] <= 1.0 for v in full["sft_val"])
    levels = [k for k in full["sft_val"][0] if k.startswith("FrozenLake/success_len")]  # by difficulty too
    assert levels and all(0.0 <= v[k] <= 1.0 for v in full["sft_val"] for k in levels)
    stopped = run_training(cfg("stopped", 0.0))  # any success reaches 0: the first validation ends it
    assert [v["step"] for v in stopped["sft_val"]] == [2.0]
    sft_row = next(r for r in read_metrics(tmp_path / "stopped") if r["step"] == -1)
    assert sft_row["sft/steps"] == 2.0
