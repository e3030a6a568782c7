"""A tiny causal LM and tokenizer built locally, saved in Hugging Face format.

Nothing is downloaded: :func:`build_tiny_model` trains a small byte-level BPE tokenizer with the
``tokenizers`` library on rockroll's own env text (system prompts, observations, answers of
FrozenLake and Sokoban by default; ``TinyModelConfig.env_ids`` names others), randomly initialises
a Qwen2-shaped causal LM with a seed, and saves both to a directory that loads like any Hugging
Face checkpoint
(``AutoModelForCausalLM.from_pretrained(path)``).

The tokenizer is byte-level, so every string (newlines, runs of spaces, ``√``) decodes back
exactly; ``<answer>``/``</answer>`` are single tokens, and so is the whole answer of each action of
the corpus envs (``<answer>Down</answer>``): a turn's decision is one sampled token and its response
two (the answer and ``<|im_end|>``), which halves the decoding steps of a multi-turn rollout. Any
other answer (a plan, a typo) is spelled from the ordinary tokens. Special tokens: ``<|pad|>``,
``<|endoftext|>``, and the chat markers ``<|im_start|>``/``<|im_end|>`` (``<|im_end|>`` is EOS, so
a response ends where its turn ends). The chat template is ChatML-like::

    <|im_start|>system\\n{content}<|im_end|>\\n<|im_start|>user\\n{content}<|im_end|>\\n<|im_start|>assistant\\n

A marker file (:data:`TINY_MARKER`) tells :func:`load_model_and_tokenizer` to load the tokenizer
explicitly as ``PreTrainedTokenizerFast(tokenizer_file=...)``: ``AutoTokenizer`` may substitute its
own class for a Qwen2 config. Real models go through ``AutoTokenizer``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import rockroll.envhub as envhub
from rockroll.agentrl.models.tool_templates import HERMES_TEMPLATE

__all__ = [
    "TinyModelConfig",
    "CHAT_TEMPLATE",
    "SPECIAL_TOKENS",
    "TINY_MARKER",
    "build_tiny_model",
    "answer_tokens",
    "build_char_tokenizer",
    "build_tokenizer",
    "corpus_texts",
    "load_model_and_tokenizer",
    "load_tokenizer",
]

TINY_MARKER = "rockroll_tiny.json"
PAD, EOS, BOS_TEXT, IM_START = "<|pad|>", "<|im_end|>", "<|endoftext|>", "<|im_start|>"
SPECIAL_TOKENS = ["<|pad|>", "<|endoftext|>", "<|im_start|>", "<|im_end|>"]
#: ordinary (non-special) added tokens: kept whole, decoded as text
ADDED_TOKENS = ["<answer>", "</answer>", "<think>", "</think>"]

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

#: a compact template for short prompts: no role names, one token after each message (``<|im_start|>``: your turn,
#: after a user message; ``<|im_end|>``, the stop token, after an answer; a newline after the system message).
#: A one-grid FrozenLake prompt is 21 tokens instead of ChatML's 28 (the engine's prefill and the update scale with it)
COMPACT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}{{ message['content'] + '\n' }}"
    "{% elif message['role'] == 'assistant' %}{{ message['content'] + '<|im_end|>' }}"
    "{% else %}{{ message['content'] + '<|im_start|>' }}{% endif %}"
    "{% endfor %}"
)
#: "hermes": ChatML plus tools in the Hermes / Qwen2.5 style (renders as "chatml" without tools)
TEMPLATES = {"chatml": CHAT_TEMPLATE, "compact": COMPACT_TEMPLATE, "hermes": HERMES_TEMPLATE}

DEFAULT_ENVS = ("FrozenLake-v0", "SimpleSokoban-v0")
TOKENIZERS = ("bpe", "chars")
UNK = "<|unk|>"


@dataclass
class TinyModelConfig:
    """Shape of the tiny model and tokenizer."""

    hidden_size: int = 128  # width of the residual stream
    num_layers: int = 2  # transformer blocks
    num_heads: int = 4  # attention heads (hidden_size must divide by it)
    num_kv_heads: int = 2  # key/value heads (grouped-query attention, like Qwen2)
    intermediate_size: int = 256  # MLP width
    max_position_embeddings: int = 2048  # longest sequence
    vocab_size: int = 512  # BPE target size (bytes + merges + special tokens)
    seed: int = 0  # random initialisation and corpus sampling
    episodes_per_env: int = 40  # episodes sampled from each env for the tokenizer corpus
    tie_word_embeddings: bool = True  # share input and output embeddings
    env_ids: tuple[str, ...] = DEFAULT_ENVS  # envs whose text trains the tokenizer
    answer_tokens: bool = True  # each listed action's whole answer becomes one token (fixed action sets)
    chat_template: str = "chatml"  # "chatml" (role names, 8 tokens around a user turn), "compact" (1 token), "hermes"
    tokenizer: str = "bpe"  # "bpe" (byte-level, vocab_size) or "chars" (one token per corpus character)
    copy_steps: int = 0  # steps of copy pretraining before saving (:mod:`rockroll.agentrl.models.copy_pretrain`)

    def __post_init__(self) -> None:
        self.env_ids = tuple(self.env_ids)
        if self.chat_template not in TEMPLATES:
            raise ValueError(f"chat_template must be one of {sorted(TEMPLATES)}, got {self.chat_template!r}")
        if not self.env_ids:
            raise ValueError("env_ids must name at least one env whose text trains the tokenizer")
        if self.hidden_size % self.num_heads:
            raise ValueError(f"hidden_size {self.hidden_size} must be divisible by num_heads {self.num_heads}")
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"num_heads {self.num_heads} must be divisible by num_kv_heads {self.num_kv_heads}")
        if self.tokenizer not in TOKENIZERS:
            raise ValueError(f"tokenizer must be one of {list(TOKENIZERS)}, got {self.tokenizer!r}")
        if self.tokenizer == "bpe" and self.vocab_size < 300:
            raise ValueError(f"vocab_size must be >= 300 (256 bytes + specials + merges), got {self.vocab_size}")
        if self.copy_steps < 0:
            raise ValueError(f"copy_steps must be >= 0, got {self.copy_steps}")
        if min(self.num_layers, self.intermediate_size, self.max_position_embeddings) < 1:
            raise ValueError("num_layers, intermediate_size and max_position_embeddings must be >= 1")


def _tool_texts(env: Any) -> list[str]:
    """A tool env's share of the corpus: its tools' JSON as templates write it (``tojson``) and example calls in
    the Hermes style, repeated so that the tokenizer's merges cover them (short prompts: the tools block is in
    every one)."""

    tools = getattr(env, "tools", ())
    if not tools:
        return []
    block = "\n".join(json.dumps(t.to_openai(), ensure_ascii=False) for t in tools)
    texts = [block] * 50
    for seed in range(20):
        env.reset(seed=seed)
        for call in env.unwrapped.tool_examples():
            body = json.dumps({"name": call.name, "arguments": dict(call.arguments)}, ensure_ascii=False)
            texts.append(f"<tool_call>\n{body}\n</tool_call>")
    return texts


def corpus_texts(env_ids: tuple[str, ...] = DEFAULT_ENVS, episodes: int = 40, seed: int = 0) -> list[str]:
    """Text the tokenizer is trained on: prompts, observations and answers of ``env_ids``.

    Each episode is played with uniformly random legal actions (seeded); role names of the chat
    template and ``<answer>`` blocks appear around the observations.
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    texts: list[str] = []
    for env_id in env_ids:
        env = envhub.make(env_id)
        texts.append(env.system_prompt())
        texts += _tool_texts(env)
        for ep in range(episodes):
            obs, _ = env.reset(seed=seed * 100_000 + ep)
            texts.append(obs)
            for _ in range(8):
                cands = env.action_candidates() or ["Up"]
                action = cands[int(rng.integers(len(cands)))]
                answer = f"<answer>{action}</answer>"
                texts.append(f"system\nuser\n{obs}\nassistant\nI should move {action}. {answer}")
                obs, _, terminated, truncated, _ = env.step(answer)
                texts.append(obs)
                if terminated or truncated:
                    break
        env.close()
    texts.append(" ".join(str(i) for i in range(200)))
    texts.append("Left Right Up Down left right up down LEFT RIGHT UP DOWN yes no the a an")
    return texts


def answer_tokens(env_ids: tuple[str, ...] = DEFAULT_ENVS) -> list[str]:
    """``<answer>ACTION</answer>`` for every action the envs list (``action_candidates``), in order."""
    out: list[str] = []
    for env_id in env_ids:
        env = envhub.make(env_id)
        env.reset(seed=0)
        out += [f"<answer>{a}</answer>" for a in env.action_candidates() if f"<answer>{a}</answer>" not in out]
        env.close()
    return out


def build_tokenizer(
    texts: list[str], vocab_size: int = 512, answers: list[str] | None = None, *, digits: bool = False
) -> Any:
    """Train a byte-level BPE tokenizer on ``texts``; return a ``PreTrainedTokenizerFast``.

    ``answers`` (whole action answers, :func:`answer_tokens`) become single tokens too; ``digits``: every
    digit is a token of its own (numbers spelt digit by digit)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.pre_tokenizer = (
        pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level]) if digits else byte_level
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    tok.add_tokens([AddedToken(t, normalized=False, special=False) for t in [*(answers or []), *ADDED_TOKENS]])
    return _wrap(tok)


def build_char_tokenizer(texts: list[str], answers: list[str] | None = None) -> Any:
    """A character-level tokenizer: one token per distinct character of ``texts``, plus the special tokens, the
    whole ``answers`` and the added tokens: the smallest vocabulary that spells the corpus (a FrozenLake corpus
    gives about 80 tokens against BPE's 512). A character outside the corpus encodes as ``<|unk|>``."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers

    chars = sorted({ch for text in texts for ch in text})
    vocab = {t: i for i, t in enumerate([*SPECIAL_TOKENS, UNK, *chars])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token=UNK))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tok.decoder = decoders.Fuse()
    tok.add_special_tokens([AddedToken(t, normalized=False, special=True) for t in SPECIAL_TOKENS])
    tok.add_tokens([AddedToken(t, normalized=False, special=False) for t in [*(answers or []), *ADDED_TOKENS]])
    return _wrap(tok)


def _wrap(tok_or_file: Any, template: str = CHAT_TEMPLATE) -> Any:
    """A ``PreTrainedTokenizerFast`` around a ``tokenizers.Tokenizer`` (or its json file), with chat ``template``."""
    from transformers import PreTrainedTokenizerFast

    kwargs: dict[str, Any] = {
        "pad_token": PAD,
        "eos_token": EOS,
        "bos_token": None,
        "unk_token": None,
        "additional_special_tokens": [BOS_TEXT, IM_START],
        "clean_up_tokenization_spaces": False,
        "padding_side": "left",
        "model_max_length": 1_000_000,
    }
    if isinstance(tok_or_file, (str, Path)):
        fast = PreTrainedTokenizerFast(tokenizer_file=str(tok_or_file), **kwargs)
    else:
        fast = PreTrainedTokenizerFast(tokenizer_object=tok_or_file, **kwargs)
    fast.chat_template = template
    return fast


def build_tiny_model(out_dir: str | Path, config: TinyModelConfig | None = None) -> Path:
    """Build the tokenizer and a randomly initialised tiny Qwen2 model; save both to ``out_dir``."""
    cfg = config or TinyModelConfig()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    texts = corpus_texts(cfg.env_ids, episodes=cfg.episodes_per_env, seed=cfg.seed)
    texts += [HERMES_TEMPLATE] if cfg.chat_template == "hermes" else []  # its tool text: no <|unk|> characters
    answers = answer_tokens(cfg.env_ids) if cfg.answer_tokens else None
    if cfg.tokenizer == "chars":
        tokenizer = build_char_tokenizer(texts, answers=answers)
    else:
        tokenizer = build_tokenizer(texts, cfg.vocab_size, answers=answers)
    tokenizer.chat_template = TEMPLATES[cfg.chat_template]
    return save_tiny_model(out, tokenizer, cfg, {"config": asdict(cfg)})


def save_tiny_model(out: Path, tokenizer: Any, cfg: TinyModelConfig, marker: dict[str, Any]) -> Path:
    """A randomly initialised tiny Qwen2 model of ``cfg``'s shape (seeded by ``cfg.seed``) around ``tokenizer``,
    saved to ``out`` with it and the tiny marker (``marker``'s keys beside the format and chat template)."""
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config

    out.mkdir(parents=True, exist_ok=True)
    model_cfg = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=cfg.hidden_size,
        intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_layers,
        num_attention_heads=cfg.num_heads,
        num_key_value_heads=cfg.num_kv_heads,
        max_position_embeddings=cfg.max_position_embeddings,
        tie_word_embeddings=cfg.tie_word_embeddings,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.convert_tokens_to_ids(BOS_TEXT),
        use_sliding_window=False,
    )
    torch.manual_seed(cfg.seed)
    model = AutoModelForCausalLM.from_config(model_cfg, dtype=torch.float32)
    if cfg.copy_steps:
        from rockroll.agentrl.models.copy_pretrain import copy_pretrain

        copy_pretrain(model, cfg.copy_steps, seed=cfg.seed)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    template = tokenizer.chat_template or CHAT_TEMPLATE
    (out / TINY_MARKER).write_text(json.dumps({"format": 1, **marker, "chat_template": template}, indent=2))
    return out


def load_tokenizer(path: str | Path) -> Any:
    """The tokenizer of a model directory: explicit fast tokenizer for tiny models, else ``AutoTokenizer``."""
    p = Path(path)
    if (p / TINY_MARKER).is_file():
        template = json.loads((p / TINY_MARKER).read_text()).get("chat_template") or CHAT_TEMPLATE
        return _wrap(p / "tokenizer.json", template)
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(path))


def load_model_and_tokenizer(path: str | Path, device: str = "cpu", dtype: str | None = None) -> tuple[Any, Any]:
    """Load a causal LM and its tokenizer from a local directory (tiny or real HF model).

    ``dtype``: ``"float32"``, ``"bfloat16"``, ``"float16"`` or None (float32 on CPU, the
    checkpoint's dtype on CUDA). The model is returned in eval mode on ``device``.
    """
    import torch
    from transformers import AutoModelForCausalLM

    tokenizer = load_tokenizer(path)
    if dtype is None:
        torch_dtype: Any = torch.float32 if str(device).startswith("cpu") else "auto"
    else:
        torch_dtype = getattr(torch, dtype)
    model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch_dtype)
    model.to(device)
    model.eval()
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer
