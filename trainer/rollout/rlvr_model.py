"""A tiny model for an RLVR run, its tokenizer trained on the task's own text (``model.build_tiny``).

The env-text tokenizer of :mod:`rockroll.agentrl.models.tiny` knows FrozenLake and Sokoban; a dataset of sums or
Python functions would be spelt byte by byte. :func:`ensure_task_model` builds, where ``model.path`` holds
no model yet, a byte-level BPE tokenizer trained on the run's training rows (prompts as the template
renders them, and the warm start's answers), with every digit a token of its own (numbers are spelt
digit by digit, so a sum's digits line up with its operands'), and a randomly initialised Qwen2-shaped
model of ``model.tiny_hidden_size`` x ``model.tiny_layers``. The folder is marked as a tiny model, so it
loads like one (:func:`rockroll.agentrl.models.tiny.load_tokenizer`: the chat template, ``<|im_end|>`` as EOS).
Held-out rows are not read: the tokenizer sees no evaluation prompt. Agentic envs in the same run
(``rollout.envs``) add their own text (random episodes' observations) and one token per action answer.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rockroll.agentrl.models.tiny import TinyModelConfig, answer_tokens, build_tokenizer, corpus_texts, save_tiny_model
from rockroll.trainer.rollout.rlvr_data import corpus, load_rows

if TYPE_CHECKING:
    from rockroll.trainer.config import TrainConfig

__all__ = ["ensure_task_model"]


def ensure_task_model(cfg: TrainConfig) -> Path:
    """``model.path``; a tiny model with a tokenizer of the task's text is built there first when
    ``model.build_tiny`` and the folder holds no model (see the module docstring)."""
    m = cfg.model
    out = Path(m.path)
    if (out / "config.json").is_file() or not m.build_tiny:
        return out  # load_policy reports a missing model without build_tiny
    data = cfg.rollout.rlvr.dataset
    train, _ = load_rows(data)
    heads = 4 if m.tiny_hidden_size % 4 == 0 else 1
    shape = TinyModelConfig(
        hidden_size=m.tiny_hidden_size, intermediate_size=2 * m.tiny_hidden_size, num_layers=m.tiny_layers,
        num_heads=heads, num_kv_heads=max(heads // 2, 1), max_position_embeddings=1024,
        vocab_size=m.tiny_vocab_size, seed=cfg.seed,
    )  # fmt: skip
    texts, answers = corpus(data, train), None
    env_ids = tuple(dict.fromkeys(e.env_id for e in cfg.rollout.envs))
    if env_ids:  # agentic envs beside the dataset: their text too, each action answer one token
        texts, answers = texts + corpus_texts(env_ids), answer_tokens(env_ids)
    tokenizer = build_tokenizer(texts, m.tiny_vocab_size, answers, digits=True)
    return save_tiny_model(out, tokenizer, shape, {"task": data.model_dump()})
