"""Tool calls restricted to the declared tools' schemas (rockroll.agentrl.engines.tool_grammar) on the hf engine.

The tiny hermes model is random, so its turns are noise; a few Adam steps teach it to open each turn with
``<tool_call>\\n{"name": "`` (nothing after), so that it attempts a call on most turns. Unrestricted, those
calls are malformed; with ``restrict_tool_calls`` every attempted call parses, names a Lookup tool and fits
its schema. The turns record what the engine chose among (``Turn.allowed``, the grammar's positions) and the
trainer's logprobs under that record equal the engine's; a record capped below the sets' widths (positions
left unrestricted) differs by exactly ``log p(S)`` there, measured.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Iterator
from typing import Any

import pytest

from rockroll.agentrl.rollout.config import EpisodeConfig
from rockroll.agentrl.rollout.env_manager import EnvManager, EpisodeSpec
from rockroll.agentrl.sources.kinds import LocalSource
from rockroll.agentrl.tools import get_parser
from rockroll.agentrl.trajectory import Trajectory
from rockroll.envs.lookup.env import TOOLS
from rockroll.envs.tools import Tool, check_call

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("xgrammar")

OPENING = '<tool_call>\n{"name": "'


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Any]]:
    """The tiny hermes model of Lookup's text (random weights) taught to open a call, and its tokenizer (one torch
    thread: on a loaded machine more threads make this tiny model's steps many times slower)."""
    import rockroll.envhub as envhub
    from rockroll.agentrl.models.tiny import TinyModelConfig, build_tiny_model, load_model_and_tokenizer
    from rockroll.agentrl.tools import encode_chat

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    cfg = TinyModelConfig(chat_template="hermes", env_ids=("Lookup-v0",), answer_tokens=False, episodes_per_env=5)
    model, tok = load_model_and_tokenizer(build_tiny_model(tmp_path_factory.mktemp("tiny_hermes"), cfg))
    env = envhub.make("Lookup-v0")
    target = tok.encode(OPENING, add_special_tokens=False)
    rows = []
    for seed in range(6):
        obs, _ = env.reset(seed=seed)
        messages = [{"role": "system", "content": env.system_prompt()}, {"role": "user", "content": obs}]
        rows.append(encode_chat(tok, messages, env.tools))
    torch.manual_seed(0)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(60):
        for prompt in rows:
            ids = torch.tensor([prompt + target])
            model(input_ids=ids, labels=torch.tensor([[-100] * len(prompt) + target])).loss.backward()
        opt.step()
        opt.zero_grad()
    yield model.eval(), tok
    torch.set_num_threads(threads)


def _engine(tiny: tuple[Any, Any]) -> Any:
    from rockroll.agentrl.engines.hf import HFEngine

    model, tok = tiny
    return HFEngine(model=model, tokenizer=tok, max_batch_size=16, seed=0, num_threads=1)


def _play(engine: Any, cfg: EpisodeConfig, seeds: list[int]) -> tuple[list[Trajectory], EnvManager]:
    manager = EnvManager(engine, LocalSource(), cfg)
    specs = [EpisodeSpec("Lookup-v0", s, group_id=f"g{s}", episode_id=f"g{s}/0", sample_seed=s) for s in seeds]

    async def run() -> list[Trajectory]:
        return list(await asyncio.gather(*(manager.run(sp) for sp in specs)))

    try:
        return asyncio.run(run()), manager
    finally:
        manager.shutdown()


def _counts(trajs: list[Trajectory]) -> dict[str, int]:
    out: dict[str, int] = {}
    for t in trajs:
        for u in t.turns:
            assert u.tools is not None
            for k, v in u.tools.items():
                out[k] = out.get(k, 0) + v
    return out


def _config(restrict: bool) -> EpisodeConfig:
    return EpisodeConfig(
        max_turns=3, max_tokens_per_turn=80, temperature=1.0, restrict_tool_calls=restrict, max_invalid_actions=None
    )


@pytest.mark.slow
def test_restricted_calls_all_parse_and_fit_their_schemas(tiny: tuple[Any, Any]) -> None:
    from rockroll.agentrl.engines.tool_grammar import ToolGrammar
    from rockroll.trainer.learner.batch import collate, token_logprobs

    engine = _engine(tiny)
    try:
        free, _ = _play(engine, _config(False), list(range(6)))
        trajs, manager = _play(engine, _config(True), list(range(6)))
    finally:
        asyncio.run(engine.close())
    before, after = _counts(free), _counts(trajs)
    print(f"\nunrestricted: {before}\nrestricted: {after}")
    assert before["malformed_calls"] + before["unknown_tools"] + before["bad_arguments"] >= 10, before
    assert after["tool_calls"] >= 4 and after["malformed_calls"] == after["unknown_tools"] == 0, after
    assert after["bad_arguments"] == 0, after
    grammar = manager._tries["Lookup-v0"]
    assert isinstance(grammar, ToolGrammar)
    for traj in trajs:
        for turn in traj.turns:  # what the engine chose among, recorded per token; each sampled token inside it
            assert turn.allowed == grammar.positions(turn.response_ids)
            assert all(not a or t in a for a, t in zip(turn.allowed, turn.response_ids, strict=True))
            assert turn.finish_reason == "stop"  # the close margin: no call cut by the token cap

    samples = [s for t in trajs for s in t.to_samples("concat")]
    batch = collate(samples, tiny[1].pad_token_id)
    allowed = batch.extras["allowed"]
    width = allowed.shape[-1]
    assert width <= len(tiny[1])  # exact sets, the widest a JSON string's (the module docstring's memory numbers)
    print(f"allowed {tuple(allowed.shape)}: {allowed.numel() * 8 / 2**20:.1f} MiB")
    with torch.no_grad():
        lp, _ = token_logprobs(
            tiny[0], batch.input_ids, batch.attention_mask, need=batch.response_mask, allowed=allowed
        )
    m = batch.response_mask > 0
    assert torch.allclose(lp[m], batch.rollout_logprobs[m], atol=1e-4)
    _capped_record_differs_by_the_allowed_mass(tiny, samples, grammar)


def _capped_record_differs_by_the_allowed_mass(tiny: tuple[Any, Any], samples: list[Any], grammar: Any) -> None:
    """A cap of 32 ids: the wider positions are recorded unrestricted; the trainer's logprob there is the
    engine's plus ``log p(S)``; the mass outside ``S`` is printed."""
    from rockroll.agentrl.engines.tool_grammar import ToolGrammar
    from rockroll.trainer.learner.batch import collate, token_logprobs

    model, tok = tiny
    capped = ToolGrammar(tok, TOOLS, stops=grammar.stops, vocab_size=grammar.vocab_size, max_tokens=80, record_cap=32)
    sample = max(samples, key=lambda s: sum(s.response_mask))
    start = [i for i, m in enumerate(sample.response_mask) if m and not sample.response_mask[i - 1]]
    exact, rec = list(sample.allowed), list(sample.allowed)
    for s in start:  # each turn's response: recorded again under the cap
        end = next((j for j in range(s, len(sample.input_ids)) if not sample.response_mask[j]), len(sample.input_ids))
        rec[s:end] = capped.positions(sample.input_ids[s:end])
    sample.allowed = rec
    batch = collate([sample], tok.pad_token_id)
    with torch.no_grad():
        lp, _ = token_logprobs(model, batch.input_ids, batch.attention_mask, allowed=batch.extras["allowed"])
        logp = torch.log_softmax(model(input_ids=batch.input_ids).logits[0].float(), -1)
    wide = [i for i, (a, b) in enumerate(zip(exact, rec, strict=True)) if a and not b]
    assert wide, "no position wider than the cap"
    off = []
    for i in wide:
        mass = logp[i - 1, list(exact[i])].exp().sum().item()
        assert lp[0, i].item() == pytest.approx(sample.old_logprobs[i] + math.log(mass), abs=1e-4)
        off.append(1 - mass)
    mean = sum(off) / len(off)
    print(f"capped positions: {len(wide)}, mass outside the allowed set: mean {mean:.4f}, max {max(off):.4f}")


def test_random_turns_through_the_grammar_parse(tiny: tuple[Any, Any]) -> None:
    """Random walks over the allowed sets (biased to open calls) always decode to valid calls and end in time."""
    from rockroll.agentrl.engines.tool_grammar import ToolGrammar

    tok = tiny[1]
    number = {"type": "object", "properties": {"a": {"type": "number"}, "n": {"enum": [1, 2]}}, "required": ["n"]}
    tools = [*TOOLS, Tool("add", "Add.", number)]
    grammar = ToolGrammar(tok, tools, stops=[tok.eos_token_id], max_tokens=160)  # calls of byte tokens are long
    opening, rng, calls = tok.encode(OPENING, add_special_tokens=False), random.Random(0), 0
    for _ in range(60):
        toks: list[int] = []
        while not toks or (toks[-1] != tok.eos_token_id and len(toks) < 160):
            ids = grammar.next_ids(toks) or tuple(range(len(tok)))
            want = opening[len(toks)] if len(toks) < len(opening) else None
            toks.append(want if want in ids and rng.random() < 0.9 else rng.choice(ids))
        parsed = get_parser("hermes").parse(tok.decode(toks, skip_special_tokens=True))
        assert toks[-1] == tok.eos_token_id and parsed.ok, parsed.problems
        assert not [e for c in parsed.calls if (e := check_call(c, tools))]
        calls += len(parsed.calls)
        assert grammar.forced_tail(toks[:-1]) in ((), (tok.eos_token_id,))  # only the end of turn is forced
    assert calls >= 20
    assert grammar.next_ids([len(tok) + 5]) == ()  # an id past the vocabulary: off the grammar, unrestricted
    assert grammar.next_ids([]) == ()  # free text: every id
    closing = grammar.next_ids(tok.encode("x", add_special_tokens=False) * 96)  # the last 64 of 160 tokens
    assert closing == (tok.eos_token_id,)  # near the cap, outside a call: only the end of turn


def test_byte_rules_refuse_what_python_refuses() -> None:
    """Raw control bytes and ill-formed UTF-8 (a surrogate, inside a token or across two) are never allowed."""
    from rockroll.agentrl.engines.tool_grammar import _byte_rules

    never, lead_of, after = _byte_rules([b"\xed", b"\xa0x", b"a\tb", b"\xed\xa0", b"\xc3\xa9", b"\x80", b""])
    assert never == {2, 3} and lead_of == {0: 0xED}
    assert 1 in after[0xED] and 5 not in after[0xED] and 1 not in after[0xE0]


def test_the_setting_needs_hermes_and_an_engine_that_restricts() -> None:
    from rockroll.agentrl.engines.random_engine import RandomEngine
    from rockroll.agentrl.models.char_tokenizer import CharTokenizer
    from rockroll.envs.config import ConfigError

    with pytest.raises(ValueError, match="hermes tool-call style only, not 'mistral'"):
        EpisodeConfig(restrict_tool_calls=True, tool_call_parser="mistral")
    with pytest.raises(ConfigError, match="RandomEngine cannot"):
        EnvManager(RandomEngine(CharTokenizer()), LocalSource(), EpisodeConfig(restrict_tool_calls=True))
    assert EnvManager(RandomEngine(CharTokenizer()), LocalSource(), EpisodeConfig()).config.restrict_tool_calls is False
