"""Copy pretraining (rockroll.agentrl.models.copy_pretrain): a random 2-layer tiny model learns to repeat a
token run it has read (induction), the skill a tool-calling agent needs to pass an id from one result to the
next call; the setting is checked and reaches the model build."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from rockroll.agentrl.models.copy_pretrain import copy_pretrain  # noqa: E402
from rockroll.agentrl.models.tiny import TinyModelConfig  # noqa: E402

#: induction forms after about 400-500 steps at this size (measured): 700 leaves room
STEPS = 700


def _model(vocab: int) -> object:
    from transformers import AutoModelForCausalLM, Qwen2Config

    torch.manual_seed(0)
    cfg = Qwen2Config(
        vocab_size=vocab, hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=256, tie_word_embeddings=True,
    )  # fmt: skip
    return AutoModelForCausalLM.from_config(cfg)


@pytest.mark.slow
def test_a_random_tiny_model_learns_to_copy() -> None:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model = _model(300)
        got = copy_pretrain(model, STEPS, seed=0, max_len=16)
    finally:
        torch.set_num_threads(threads)
    # a model that cannot copy scores about ln(280) = 5.6 nats on the repeat; one that copies, near 0
    assert got["copy/first_loss"] > 4.5, got
    assert got["copy/last_loss"] < 1.0, got


def test_copy_steps_is_checked() -> None:
    assert TinyModelConfig().copy_steps == 0
    with pytest.raises(ValueError, match="copy_steps"):
        TinyModelConfig(copy_steps=-1)
    with pytest.raises(ValueError, match="too small"):
        copy_pretrain(_model(24), 1)
