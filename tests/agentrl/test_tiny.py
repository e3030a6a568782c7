"""The tiny local model: tokenizer round trips on env text, chat template, HF loading, CLI."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import rockroll.envhub as envhub  # noqa: E402
from rockroll.agentrl.models.tiny import (  # noqa: E402
    CHAT_TEMPLATE,
    TINY_MARKER,
    TinyModelConfig,
    build_tiny_model,
    load_model_and_tokenizer,
    load_tokenizer,
)

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="module")
def tokenizer(tiny_path: Path):
    return load_tokenizer(tiny_path)


def _env_texts(env_id: str, seeds: range) -> list[str]:
    """System prompt, then observations of a few episodes played with the env's own candidates."""
    env = envhub.make(env_id)
    texts = [env.system_prompt()]
    for seed in seeds:
        obs, _ = env.reset(seed=seed)
        texts.append(obs)
        for k in range(5):
            cands = env.action_candidates()
            obs, _, term, trunc, _ = env.step(f"<answer>{cands[(seed + k) % len(cands)]}</answer>")
            texts.append(obs)
            if term or trunc:
                break
    env.close()
    return texts


@pytest.mark.parametrize("env_id", ["FrozenLake-v0", "SimpleSokoban-v0"])
def test_round_trip_on_real_env_text(tokenizer, env_id: str) -> None:
    # seeds far from the corpus's (0..39) so the text was not seen in training
    for text in _env_texts(env_id, range(1000, 1010)):
        ids = tokenizer.encode(text, add_special_tokens=False)
        assert tokenizer.decode(ids) == text
        assert tokenizer.unk_token_id is None or tokenizer.unk_token_id not in ids


def test_round_trip_of_awkward_whitespace_and_symbols(tokenizer) -> None:
    for text in ["  two  spaces\n\n\nand\ttabs  ", "√ X_#\n", "\n", " leading", "é ü 你好 🙂", "<answer>Left</answer>"]:
        assert tokenizer.decode(tokenizer.encode(text, add_special_tokens=False)) == text


def test_special_and_answer_tokens(tokenizer) -> None:
    assert tokenizer.eos_token == "<|im_end|>"
    assert tokenizer.pad_token == "<|pad|>"
    assert tokenizer.pad_token_id != tokenizer.eos_token_id
    assert tokenizer.padding_side == "left"
    for t in ["<answer>", "</answer>", "<|im_start|>", "<|im_end|>"]:
        assert len(tokenizer.encode(t, add_special_tokens=False)) == 1, t
    ids = tokenizer.encode("<answer>Right</answer>", add_special_tokens=False)
    assert len(ids) <= 3  # the action word is merged into one token
    # skip_special_tokens drops chat markers but keeps the answer tags
    text = tokenizer.decode(ids + [tokenizer.eos_token_id], skip_special_tokens=True)
    assert text == "<answer>Right</answer>"


def test_chat_template(tokenizer) -> None:
    env = envhub.make("FrozenLake-v0")
    obs, _ = env.reset(seed=3)
    messages = [
        {"role": "system", "content": env.system_prompt()},
        {"role": "user", "content": obs},
        {"role": "assistant", "content": "<answer>Left</answer>"},
        {"role": "user", "content": obs},
    ]
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    expected = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    assert text == expected + "<|im_start|>assistant\n"
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False)
    assert ids == tokenizer.encode(text, add_special_tokens=False)
    assert tokenizer.decode(ids) == text
    no_prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=False, tokenize=False)
    assert no_prompt == expected
    assert tokenizer.chat_template == CHAT_TEMPLATE


def test_compact_chat_template_shortens_prompts_and_survives_a_reload(tmp_path: Path, tiny_path: Path) -> None:
    """``chat_template: compact``: one token after each message (a FrozenLake grid prompt: 21 tokens against
    ChatML's 28); the template is saved with the model and loaded back; full-history prompts extend each other."""
    from rockroll.agentrl.models.chat import PromptBuilder, format_observation

    path = build_tiny_model(tmp_path / "compact", TinyModelConfig(chat_template="compact", episodes_per_env=5))
    tok = load_tokenizer(path)
    env = envhub.make("FrozenLake-v0")
    obs, _ = env.reset(seed=3)
    grid = format_observation(obs, "cells")
    short = PromptBuilder(tok, "", history="last_k", last_k=0).first_prompt(grid)
    long = PromptBuilder(load_tokenizer(tiny_path), "", history="last_k", last_k=0).first_prompt(grid)
    assert tok.decode(short) == grid + "<|im_start|>" and len(long) - len(short) == 7
    full = PromptBuilder(tok, env.system_prompt(), history="full")
    first = full.first_prompt(obs)
    full.add_response([*tok.encode("<answer>Left</answer>", add_special_tokens=False), tok.eos_token_id])
    second = full.next_prompt(obs)
    assert second[: len(first)] == first and full.extends_previous
    assert tok.decode(second).endswith("<answer>Left</answer><|im_end|>" + obs + "<|im_start|>")
    with pytest.raises(ValueError, match="chat_template"):
        TinyModelConfig(chat_template="jinja")


def test_character_tokenizer_spells_one_token_per_character_and_survives_a_reload(tmp_path: Path) -> None:
    """``tokenizer: chars``: the vocabulary is the corpus's characters plus the special and whole-answer tokens
    (76 for FrozenLake against BPE's 512); a raw grid is one token per cell and newline; unseen characters are
    ``<|unk|>``; the model's embedding has one row per token, and the tokenizer loads back from the directory."""
    from rockroll.agentrl.models.chat import PromptBuilder

    cfg = TinyModelConfig(tokenizer="chars", env_ids=("FrozenLake-v0",), chat_template="compact", episodes_per_env=5)
    path = build_tiny_model(tmp_path / "chars", cfg)
    model, tok = load_model_and_tokenizer(path)
    assert 40 < len(tok) < 100 and model.get_input_embeddings().weight.shape[0] == len(tok)
    for text in _env_texts("FrozenLake-v0", range(1000, 1010)):
        ids = tok.encode(text, add_special_tokens=False)
        assert tok.decode(ids) == text
        assert len(ids) == len(text) or "<answer>" in text  # the system prompt names an answer: one token
    grid = "__O_\nP___\n___G\n___O"
    prompt = PromptBuilder(tok, "", history="last_k", last_k=0).first_prompt(grid)
    assert len(prompt) == len(grid) + 1 and tok.decode(prompt) == grid + "<|im_start|>"
    answer = tok.encode("<answer>Down</answer><|im_end|>", add_special_tokens=False)
    assert answer == [tok.convert_tokens_to_ids("<answer>Down</answer>"), tok.eos_token_id]
    assert tok.encode("é", add_special_tokens=False) == [tok.convert_tokens_to_ids("<|unk|>")]
    with pytest.raises(ValueError, match="tokenizer"):
        TinyModelConfig(tokenizer="words")
    TinyModelConfig(tokenizer="chars", vocab_size=10)  # the BPE size does not apply


def test_saved_in_hf_format_and_loads_by_path(tiny_path: Path) -> None:
    from transformers import AutoConfig, AutoModelForCausalLM, PreTrainedTokenizerFast

    assert (tiny_path / TINY_MARKER).is_file()
    assert (tiny_path / "config.json").is_file() and (tiny_path / "tokenizer.json").is_file()
    cfg = AutoConfig.from_pretrained(str(tiny_path))
    assert (cfg.model_type, cfg.hidden_size, cfg.num_hidden_layers, cfg.num_attention_heads) == ("qwen2", 128, 2, 4)
    model = AutoModelForCausalLM.from_pretrained(str(tiny_path))
    loaded, tok = load_model_and_tokenizer(tiny_path)
    assert isinstance(tok, PreTrainedTokenizerFast)
    assert cfg.vocab_size == len(tok)
    for (name, a), (_, b) in zip(model.state_dict().items(), loaded.state_dict().items(), strict=True):
        assert torch.equal(a, b), name
    ids = torch.tensor([tok.encode("_G__\nOO__", add_special_tokens=False)])
    with torch.no_grad():
        logits = loaded(ids).logits
    assert logits.shape == (1, ids.shape[1], len(tok))
    assert torch.isfinite(logits).all()


def test_seeded_build_is_deterministic(tmp_path: Path) -> None:
    def weights(seed: int, name: str) -> dict:
        cfg = TinyModelConfig(
            hidden_size=32, num_heads=2, num_kv_heads=1, intermediate_size=64, seed=seed, episodes_per_env=2
        )
        model, _ = load_model_and_tokenizer(build_tiny_model(tmp_path / name, cfg))
        return model.state_dict()

    a, b, c = weights(1, "a"), weights(1, "b"), weights(2, "c")
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not all(torch.equal(a[k], c[k]) for k in a)
    assert (tmp_path / "a" / "tokenizer.json").read_text() == (tmp_path / "b" / "tokenizer.json").read_text()


@pytest.mark.parametrize(
    "kwargs",
    [{"hidden_size": 130, "num_heads": 4}, {"num_heads": 4, "num_kv_heads": 3}, {"vocab_size": 100}, {"num_layers": 0}],
)
def test_config_rejects_bad_shapes(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        TinyModelConfig(**kwargs)


def test_cli_build_tiny(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from rockroll.cli.main import app

    out = tmp_path / "cli_model"
    result = CliRunner().invoke(app, ["model", "build-tiny", str(out), "--hidden-size", "64", "--vocab-size", "400"])
    assert result.exit_code == 0, result.output
    _, tok = load_model_and_tokenizer(out)
    assert len(tok) <= 400 + 8
    bad = CliRunner().invoke(app, ["model", "build-tiny", str(tmp_path / "bad"), "--hidden-size", "130"])
    assert bad.exit_code != 0


def test_directories_without_the_marker_load_like_real_hf_models(tiny_path: Path, tmp_path: Path) -> None:
    import shutil

    real = tmp_path / "real"
    shutil.copytree(tiny_path, real)
    (real / TINY_MARKER).unlink()
    model, tok = load_model_and_tokenizer(real)  # the AutoTokenizer path
    obs, _ = envhub.make("SimpleSokoban-v0").reset(seed=5)
    assert tok.decode(tok.encode(obs, add_special_tokens=False)) == obs
    assert tok.apply_chat_template(
        [{"role": "user", "content": obs}], add_generation_prompt=True, tokenize=False
    ).endswith("<|im_start|>assistant\n")
    assert model.config.model_type == "qwen2" and not model.training


def test_tokenizer_corpus_follows_env_ids(tmp_path: Path) -> None:
    """A tiny model for ALFWorld learns ALFWorld's words: its observations take fewer tokens than with the
    default (grid envs') tokenizer, and no whole-answer tokens are added for its object-naming commands."""
    shape = {"hidden_size": 32, "num_heads": 2, "num_kv_heads": 1, "intermediate_size": 64, "episodes_per_env": 5}
    default = load_tokenizer(build_tiny_model(tmp_path / "grid", TinyModelConfig(**shape)))
    alf_cfg = TinyModelConfig(**shape, env_ids=("ALFWorld-v0",), answer_tokens=False, vocab_size=1024)
    alf = load_tokenizer(build_tiny_model(tmp_path / "alf", alf_cfg))
    text = "You arrive at countertop 1. On the countertop 1, you see a mug 2, and a apple 1."
    assert len(alf.encode(text, add_special_tokens=False)) <= len(default.encode(text, add_special_tokens=False)) / 2
    assert "<answer>Down</answer>" in default.get_vocab()
    assert not any(t.startswith("<answer>") and t != "<answer>" for t in alf.get_vocab())
    assert alf.decode(alf.encode(text, add_special_tokens=False)) == text
    with pytest.raises(ValueError, match="env_ids"):
        TinyModelConfig(env_ids=())
