"""A tiny model for an RLVR run, its tokenizer trained on the task's own text (``model.build_tiny``).

The env-text tokenizer of :mod:`rockroll.agentrl.tiny` knows FrozenLake and Sokoban; a dataset of sums or
Python functions would be spelt byte by byte. :func:`ensure_task_model` builds, where ``model.path`` holds
no model yet, a byte-level BPE tokenizer trained on the run's training rows (prompts as the template
renders them, and the warm start's answers), with every digit a token of its own (numbers are spelt
digit by digit, so a sum's digits line up with its operands'), and a randomly initialised Qwen2-shaped
model of ``model.tiny_hidden_size`` x ``model.tiny_layers``. The folder is marked as a tiny model, so it
loads like one (:func:`rockroll.agentrl.tiny.load_tokenizer`: the chat template, ``<|im_end|>`` as EOS).
Held-out rows are not read: the tokenizer sees no evaluation prompt.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rockroll.agentrl.tiny import ADDED_TOKENS, BOS_TEXT, CHAT_TEMPLATE, SPECIAL_TOKENS, TINY_MARKER, load_tokenizer
from rockroll.trainer.rollout.rlvr_data import corpus, load_rows

if TYPE_CHECKING:
    from rockroll.trainer.config import TrainConfig

__all__ = ["ensure_task_model", "task_tokenizer"]


def task_tokenizer(texts: list[str], vocab_size: int) -> Any:
    """A ``tokenizers.Tokenizer``: byte-level BPE over ``texts``, one token per digit, the tiny special tokens."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    tok.add_tokens([AddedToken(t, normalized=False, special=False) for t in ADDED_TOKENS])
    return tok


def ensure_task_model(cfg: TrainConfig) -> Path:
    """``model.path``; a tiny model with a tokenizer of the task's text is built there first when
    ``model.build_tiny`` and the folder holds no model (see the module docstring)."""
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config

    m = cfg.model
    out = Path(m.path)
    if (out / "config.json").is_file() or not m.build_tiny:
        return out  # load_policy reports a missing model without build_tiny
    data = cfg.rollout.rlvr.dataset
    train, _ = load_rows(data)
    out.mkdir(parents=True, exist_ok=True)
    task_tokenizer(corpus(data, train), m.tiny_vocab_size).save(str(out / "tokenizer.json"))
    (out / TINY_MARKER).write_text(
        json.dumps({"format": 1, "task": data.model_dump(), "chat_template": CHAT_TEMPLATE}, indent=2)
    )
    tokenizer = load_tokenizer(out)  # the tiny wrapper: chat template, pad and EOS tokens
    heads = 4 if m.tiny_hidden_size % 4 == 0 else 1
    model_cfg = Qwen2Config(
        vocab_size=len(tokenizer), hidden_size=m.tiny_hidden_size, intermediate_size=2 * m.tiny_hidden_size,
        num_hidden_layers=m.tiny_layers, num_attention_heads=heads, num_key_value_heads=max(heads // 2, 1),
        max_position_embeddings=1024, tie_word_embeddings=True, pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id, bos_token_id=tokenizer.convert_tokens_to_ids(BOS_TEXT),
        use_sliding_window=False,
    )  # fmt: skip
    torch.manual_seed(cfg.seed)
    model = AutoModelForCausalLM.from_config(model_cfg, dtype=torch.float32)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
