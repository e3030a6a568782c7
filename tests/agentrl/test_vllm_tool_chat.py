"""The ``openai`` engine's chat mode plays a tool env against vLLM's own server (``.venv-vllm``; skipped with
its build status if absent), started with ``--enable-auto-tool-choice --tool-call-parser hermes`` and the tiny
hermes chat template.

The tiny model is first taught one reply (a ``find`` call in the Hermes style) by a few seconds of supervised
steps, so greedy decoding writes a call on every turn: vLLM's parser must read the same call that this project's
hermes parser reads from the HF engine's greedy tokens of the same prompt. The episode is played through the
env manager (the server's calls reach the env, its results come back as tool messages), its turns are marked
not exact, and training rows are refused.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from rockroll.agentrl.engines.base import GenerationRequest, SamplingParams
from rockroll.agentrl.engines.openai_engine import OpenAIEngine
from rockroll.agentrl.models.tiny import TinyModelConfig, build_tiny_model, load_tokenizer
from rockroll.agentrl.models.tool_templates import HERMES_TEMPLATE
from rockroll.agentrl.rollout.config import EpisodeConfig
from rockroll.agentrl.rollout.env_manager import EnvManager, EpisodeSpec
from rockroll.agentrl.sources.kinds import LocalSource
from rockroll.agentrl.tools import encode_chat, get_parser
from rockroll.envs.tools import ToolAction, ToolCall
from tests.agentrl.model_server import free_port
from tests.agentrl.test_vllm_engine import VLLM_ENV, _wait_healthy, stop_server
from tests.agentrl.vllm_venv import vllm_python

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.slow
REPLY = ToolAction("", (ToolCall("c", "find", {"name": "Eve"}),))


def _teach_one_reply(path: Path) -> None:
    """A few Adam steps on (any of the first three prompts of a Lookup episode that calls REPLY -> REPLY), so
    that greedy decoding writes that call on each turn."""
    import rockroll.envhub as envhub
    from rockroll.agentrl.tools import assistant_message, tool_message
    from rockroll.envs.tools import ToolResult

    tok = load_tokenizer(path)
    model = transformers.AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32)
    env = envhub.make("Lookup-v0")
    target = tok.encode(get_parser("hermes").render(REPLY), add_special_tokens=False) + [tok.eos_token_id]
    rows = []
    for seed in range(4):
        obs, _ = env.reset(seed=seed)
        messages = [{"role": "system", "content": env.system_prompt()}, {"role": "user", "content": obs}]
        for _ in range(3):
            rows.append(encode_chat(tok, messages, env.tools))
            info = env.step(REPLY)[4]
            result = ToolResult("c", "find", info["tool_results"][0]["content"])
            messages += [assistant_message(REPLY), tool_message(result)]
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(60):
        total = 0.0
        for prompt in rows:
            ids = torch.tensor([prompt + target])
            labels = torch.tensor([[-100] * len(prompt) + target])
            loss = model(input_ids=ids, labels=labels).loss
            loss.backward()
            opt.step()
            opt.zero_grad()
            total += loss.item()
        if total / len(rows) < 0.01:
            break
    model.save_pretrained(str(path))


@pytest.fixture(scope="module")
def taught(tmp_path_factory: pytest.TempPathFactory) -> Path:
    vllm_python()  # skip before building anything
    torch.set_num_threads(1)
    cfg = TinyModelConfig(chat_template="hermes", env_ids=("Lookup-v0",), answer_tokens=False)
    path = build_tiny_model(tmp_path_factory.mktemp("tiny_tools") / "model", cfg)
    _teach_one_reply(path)
    return path


def test_chat_mode_plays_lookup_against_vllms_hermes_parser(taught: Path, tmp_path: Path) -> None:
    from rockroll.agentrl.engines.hf import HFEngine

    template = tmp_path / "hermes.jinja"
    template.write_text(HERMES_TEMPLATE)
    # the server tokenises the prompt text itself: given the model folder, transformers' AutoTokenizer swaps in
    # Qwen2's own tokenizer class for a Qwen2 config (another pre-tokenizer); a folder with the tokenizer files
    # only loads the tiny tokenizer as built (real checkpoints need none of this)
    tokenizer = tmp_path / "tokenizer"
    tokenizer.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(taught / name, tokenizer / name)
    port = free_port()
    cmd = [vllm_python(), "-m", "vllm.entrypoints.openai.api_server", "--model", str(taught)]
    cmd += ["--tokenizer", str(tokenizer)]
    cmd += ["--served-model-name", "tiny", "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32"]
    cmd += ["--enforce-eager", "--max-model-len", "2048", "--seed", "0"]
    cmd += ["--enable-auto-tool-choice", "--tool-call-parser", "hermes", "--chat-template", str(template)]
    env = {**os.environ, **VLLM_ENV}
    env.pop("VLLM_ENABLE_V1_MULTIPROCESSING")
    log = tmp_path / "server.log"
    with open(log, "wb") as out:  # a file, not a pipe: vLLM logs enough to fill a pipe and stall
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
    hf = HFEngine(str(taught), max_batch_size=2, num_threads=1, seed=0)
    try:
        _wait_healthy(proc, f"http://127.0.0.1:{port}/health", log, deadline_s=300)
        chat = OpenAIEngine(f"http://127.0.0.1:{port}", tokenizer=taught, mode="chat")
        cfg = EpisodeConfig(max_turns=3, max_tokens_per_turn=40, temperature=0.0, max_invalid_actions=None)
        manager = EnvManager(chat, LocalSource(), cfg)
        traj = asyncio.run(manager.run(EpisodeSpec("Lookup-v0", 2, episode_id="g0/0")))
        manager.shutdown()
        asyncio.run(chat.close())
        assert traj.failure is None and len(traj.turns) == 3, [t.action_text for t in traj.turns]
        for turn in traj.turns:  # vLLM's parser read the taught call on every turn; the env ran it
            assert turn.tools is not None and turn.tools["tool_calls"] == 1 and not turn.tokens_exact
            assert '"id"' in turn.observation or "no record" in turn.observation
        with pytest.raises(ValueError, match="not training"):
            traj.to_samples()

        # this project's parser on the HF engine's greedy tokens of the first prompt reads the same call
        prompt = traj.turns[0].prompt_ids
        req = GenerationRequest(prompt, SamplingParams(max_new_tokens=40, temperature=0.0))
        result = asyncio.run(hf.generate(req))
        parsed = get_parser("hermes").parse(hf.tokenizer.decode(result.token_ids, skip_special_tokens=True))
        assert [(c.name, c.arguments) for c in parsed.calls] == [("find", {"name": "Eve"})]
        assert traj.turns[0].observation.startswith("[find]")
    finally:
        asyncio.run(hf.close())
        stop_server(proc)


def test_hf_and_vllm_engines_give_the_same_calls_from_the_same_tokens(taught: Path) -> None:
    """Training engines: the rollout's own parser reads each turn from the sampled ids, so two engines that sample
    the same ids (greedy, the same weights) play the same calls, turn for turn."""
    from rockroll.agentrl.engines import make_engine
    from rockroll.agentrl.engines.hf import HFEngine

    cfg = EpisodeConfig(max_turns=3, max_tokens_per_turn=40, temperature=0.0, max_invalid_actions=None)
    played = []
    for engine in (
        HFEngine(str(taught), max_batch_size=4, num_threads=1, seed=0),
        make_engine(
            "vllm", model_path=taught, python_executable=vllm_python(), dtype="float32", enforce_eager=True,
            max_model_len=2048, cpu_threads=1,
        ),
    ):  # fmt: skip
        manager = EnvManager(engine, LocalSource(), cfg)

        async def play(m: EnvManager = manager) -> list:
            return list(await asyncio.gather(*(m.run(EpisodeSpec("Lookup-v0", s, episode_id=f"e{s}")) for s in (1, 2))))

        try:
            played.append(asyncio.run(play()))
        finally:
            manager.shutdown()
            asyncio.run(engine.close())
    hf, vllm = played
    for a, b in zip(hf, vllm, strict=True):
        assert a.failure is None and b.failure is None and len(a.turns) == 3
        assert [t.response_ids for t in a.turns] == [t.response_ids for t in b.turns]
        assert [t.tools for t in a.turns] == [t.tools for t in b.turns] and a.turns[0].tools["tool_calls"] == 1
        assert [t.observation for t in a.turns] == [t.observation for t in b.turns]
