"""The tiny model of an RLVR run (trainer/rollout/rlvr_model.py): a tokenizer of the task's text, digits one
token each, that round-trips and loads like any tiny model."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")


def test_a_task_model_is_built_on_the_training_text(tmp_path: Path) -> None:
    from rockroll.trainer.config_io import config_from_dict
    from rockroll.trainer.learner.models import load_policy
    from rockroll.trainer.rollout.rlvr_model import ensure_task_model

    torch.set_num_threads(1)
    cfg = config_from_dict(
        {
            "model": {"path": str(tmp_path / "m"), "tiny_hidden_size": 32, "tiny_layers": 1},
            "rollout": {
                "mode": "rlvr",
                "rlvr": {"dataset": {"generator": "python_functions", "size": 50, "heldout_size": 5}},
            },
        }
    )
    path = ensure_task_model(cfg)
    model, tok = load_policy(cfg.model)
    assert model.config.hidden_size == 32 and tok.eos_token == "<|im_end|>"
    texts = ["Compute 1234 + 56. Put the final answer in \\boxed{}.", "```python\ndef f(x):\n    return x * 3\n```"]
    for text in texts:
        ids = tok.encode(text, add_special_tokens=False)
        assert tok.decode(ids) == text
    digits = tok.convert_ids_to_tokens(tok.encode("1234", add_special_tokens=False))
    assert digits == ["1", "2", "3", "4"]  # numbers are spelt digit by digit
    mtime = (path / "config.json").stat().st_mtime
    assert ensure_task_model(cfg) == path and (path / "config.json").stat().st_mtime == mtime  # built once
