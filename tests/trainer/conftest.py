"""Shared fixtures: a tiny locally built model (tokenizer + Qwen2-shaped LM) and sample batches."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tests.api.conftest import readable_by_jobs

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny model (hidden 32, 1 layer) built once per session."""
    from rockroll.agentrl.models.tiny import TinyModelConfig, build_tiny_model

    torch.set_num_threads(1)
    out = tmp_path_factory.mktemp("tiny") / "model"
    model = build_tiny_model(
        out,
        TinyModelConfig(
            hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=64, episodes_per_env=5
        ),
    )
    readable_by_jobs(out.parent)  # an admin's shared model folder: job workers (unprivileged under root) read it
    return model


def random_samples(n: int, vocab: int, seed: int = 0, groups: int = 2) -> list:
    """``n`` TrainSample rows with random prompts/responses, rewards 0/1 and ``groups`` groups."""
    from rockroll.agentrl.trajectory import TrainSample

    rng = random.Random(seed)
    out = []
    for i in range(n):
        p, r = rng.randint(3, 6), rng.randint(2, 5)
        ids = [rng.randrange(10, vocab) for _ in range(p + r)]
        out.append(
            TrainSample(
                ids, [0] * p + [1] * r, [0.0] * p + [-3.0] * r, float((i // groups) % 2), f"g{i % groups}", f"e{i}", 0
            )
        )
    return out


@pytest.fixture(scope="session")
def small_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The default tiny model shape (hidden 128, 2 layers, ~0.5M parameters), built once per session."""
    from rockroll.agentrl.models.tiny import TinyModelConfig, build_tiny_model

    torch.set_num_threads(1)
    out = tmp_path_factory.mktemp("small") / "model"
    return build_tiny_model(out, TinyModelConfig(episodes_per_env=5))
