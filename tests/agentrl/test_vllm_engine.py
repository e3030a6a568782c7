"""The vLLM engine through the real vLLM venv (``.venv-vllm``; skipped with its build status if absent).

Checks: logprobs equal a plain HF forward pass of the tiny model within 1e-4; a weight update
(folder, bytes, and a saved checkpoint folder) changes outputs and then matches HF with the new
weights (tied embeddings included); a seeded batch whose prompts exceed vLLM's default token
budget (4096) leaves the engine alive; a killed host raises ``EngineDeadError`` and the next call
restarts it with the current weights; the OpenAI-compatible server of the same venv serves the
``openai`` engine (token-id prompts, token ids and logprobs back).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from rockroll.agentrl.engines import EngineDeadError, GenerationRequest, SamplingParams, make_engine
from rockroll.agentrl.engines.openai_engine import OpenAIEngine
from rockroll.agentrl.engines.vllm_engine import VLLMEngine
from rockroll.agentrl.models.tiny import build_tiny_model
from tests.agentrl.model_server import free_port
from tests.agentrl.vllm_venv import vllm_python

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.slow
torch.set_num_threads(1)
TOL = 1e-4
VLLM_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "OMP_NUM_THREADS": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}


@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    vllm_python()  # skip before building anything
    return build_tiny_model(tmp_path_factory.mktemp("tiny_vllm") / "model")


@pytest.fixture(scope="module")
def hf(tiny_path: Path):
    model = transformers.AutoModelForCausalLM.from_pretrained(str(tiny_path), dtype=torch.float32).eval()
    assert model.config.tie_word_embeddings
    return model


@pytest.fixture(scope="module")
def engine(tiny_path: Path):
    eng = make_engine(
        "vllm",
        model_path=tiny_path,
        python_executable=vllm_python(),
        dtype="float32",
        enforce_eager=True,
        max_model_len=2048,
        cpu_threads=1,
    )
    yield eng
    asyncio.run(eng.close())


def _prompts(tok, n: int) -> list[list[int]]:
    import rockroll.envhub as envhub

    env = envhub.make("FrozenLake-v0")
    out = []
    for i in range(n):
        obs, _ = env.reset(seed=i)
        text = tok.apply_chat_template([{"role": "user", "content": obs}], add_generation_prompt=True, tokenize=False)
        out.append(tok.encode(text, add_special_tokens=False))
    return out


def _run(engine, requests):
    async def go():
        return await asyncio.gather(*(engine.generate(r) for r in requests))

    return asyncio.run(go())


def _max_error(model, prompt: list[int], result) -> float:
    with torch.no_grad():
        logp = torch.log_softmax(model(torch.tensor([prompt + result.token_ids])).logits[0].float(), dim=-1)
    ref = [logp[len(prompt) - 1 + j, t].item() for j, t in enumerate(result.token_ids)]
    assert len(ref) == len(result.logprobs) > 0 and result.logprobs_exact
    return max(abs(a - b) for a, b in zip(ref, result.logprobs, strict=True))


def _greedy(prompts, n: int = 10) -> list[GenerationRequest]:
    return [GenerationRequest(p, SamplingParams(max_new_tokens=n, temperature=0.0)) for p in prompts]


def test_logprobs_match_an_hf_forward_pass(engine: VLLMEngine, hf) -> None:
    prompts = _prompts(engine.tokenizer, 6)
    params = [
        SamplingParams(max_new_tokens=12, temperature=t, top_k=k, seed=i)
        for i, (t, k) in enumerate([(1.0, 0), (0.7, 0), (0.0, 0)] * 2)
    ]
    results = _run(engine, [GenerationRequest(p, sp) for p, sp in zip(prompts, params, strict=True)])
    for p, r in zip(prompts, results, strict=True):
        assert _max_error(hf, p, r) < TOL
        assert r.weight_version == 0 and r.tokens_exact
    assert engine.facts["device"] == "cpu" and engine.facts["chunked_prefill"] is False


def test_seeded_batch_beyond_the_default_token_budget(engine: VLLMEngine) -> None:
    import numpy as np

    rng = np.random.default_rng(0)
    vocab = len(engine.tokenizer)
    prompts = [[int(t) for t in rng.integers(4, vocab, size=1500)] for _ in range(4)]  # 6000 tokens > 4096
    reqs = [GenerationRequest(p, SamplingParams(max_new_tokens=6, seed=100 + i)) for i, p in enumerate(prompts)]
    first = _run(engine, reqs)
    again = _run(engine, reqs)
    assert [r.token_ids for r in first] == [r.token_ids for r in again]  # seeds reproduce
    assert all(len(r.token_ids) == 6 for r in first)
    assert engine.facts["max_num_batched_tokens"] >= 2048
    short = _run(engine, _greedy(_prompts(engine.tokenizer, 1), 3))  # still alive
    assert len(short[0].token_ids) == 3


def _perturb(model, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():  # embed_tokens too: the tied output layer must follow
            p.add_(torch.randn(p.shape, generator=gen) * 0.05)


def _check_update(engine: VLLMEngine, hf, weights, version: int, prompts) -> None:
    before = _run(engine, _greedy(prompts))
    engine.update_weights(weights, version=version)
    after = _run(engine, _greedy(prompts))
    assert [r.logprobs for r in before] != [r.logprobs for r in after]
    for p, r in zip(prompts, after, strict=True):
        assert r.weight_version == version
        assert _max_error(hf, p, r) < TOL, f"version {version}: engine logprobs differ from HF with the new weights"


def test_weight_updates_match_hf_with_the_new_weights(engine: VLLMEngine, hf, tmp_path: Path) -> None:
    prompts = _prompts(engine.tokenizer, 4)
    _perturb(hf, 1)
    _check_update(engine, hf, hf.state_dict(), 1, prompts)  # a state dict through a folder
    engine.weight_transport = "bytes"
    _perturb(hf, 2)
    _check_update(engine, hf, hf.state_dict(), 2, prompts)  # a state dict as safetensors bytes
    _perturb(hf, 3)
    hf.save_pretrained(tmp_path / "ckpt")
    _check_update(engine, hf, tmp_path / "ckpt", 3, prompts)  # a checkpoint folder the trainer saved
    assert engine.sleep() is False and engine.wake_up() is False  # no sleep mode on CPU
    assert engine.reset_prefix_cache() is True


def test_a_killed_host_is_an_infra_error_and_restarts_with_current_weights(engine: VLLMEngine, hf) -> None:
    prompts = _prompts(engine.tokenizer, 2)
    long = GenerationRequest(prompts[0], SamplingParams(max_new_tokens=1500, temperature=1.0, seed=1))

    async def kill_mid_generation():
        task = asyncio.ensure_future(engine.generate(long))
        end = time.monotonic() + 30
        while engine.in_flight == 0 and time.monotonic() < end:
            await asyncio.sleep(0)  # yield until the request is on the pipe
        os.kill(engine.pid, signal.SIGKILL)
        with pytest.raises(EngineDeadError, match="dead"):
            await task

    old_pid = engine.pid
    asyncio.run(kill_mid_generation())
    assert engine.wait_host_exited(30) and not engine.alive
    results = _run(engine, _greedy(prompts))  # the next call starts a new host
    assert engine.pid != old_pid and engine.restarts == 1
    for p, r in zip(prompts, results, strict=True):
        assert r.weight_version == engine.weight_version == 3
        assert _max_error(hf, p, r) < TOL  # the restarted host has the last weights


def _wait_healthy(proc: subprocess.Popen, url: str, log: Path, deadline_s: float) -> None:
    """Until ``url`` answers 200; fails at once if the server exits, or after ``deadline_s``."""
    import httpx

    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        try:  # wait for the condition "the server exited" for half a second, between health checks
            proc.wait(timeout=0.5)
        except subprocess.TimeoutExpired:
            continue
        raise AssertionError(f"the vLLM OpenAI server exited: {log.read_text()[-3000:]}")
    raise AssertionError(f"the vLLM OpenAI server was not healthy within {deadline_s} s")


def test_openai_engine_against_vllm_openai_server(tiny_path: Path, tmp_path: Path) -> None:
    port = free_port()
    cmd = [vllm_python(), "-m", "vllm.entrypoints.openai.api_server", "--model", str(tiny_path)]
    cmd += ["--served-model-name", "tiny", "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32"]
    cmd += ["--enforce-eager", "--max-model-len", "2048", "--seed", "0"]
    env = {**os.environ, **VLLM_ENV}
    env.pop("VLLM_ENABLE_V1_MULTIPROCESSING")
    log = tmp_path / "server.log"
    with open(log, "wb") as out:  # a file, not a pipe: vLLM logs enough to fill a pipe and stall
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait_healthy(proc, f"http://127.0.0.1:{port}/health", log, deadline_s=240)
        eng = OpenAIEngine(f"http://127.0.0.1:{port}", tokenizer=tiny_path)
        model = transformers.AutoModelForCausalLM.from_pretrained(str(tiny_path), dtype=torch.float32).eval()
        prompts = _prompts(eng.tokenizer, 3)
        reqs = [
            GenerationRequest(p, SamplingParams(max_new_tokens=8, temperature=t, seed=i))
            for i, (p, t) in enumerate(zip(prompts, (1.0, 0.0, 0.7), strict=True))
        ]
        results = _run(eng, reqs)
        for p, r in zip(prompts, results, strict=True):
            assert r.tokens_exact and _max_error(model, p, r) < TOL
        asyncio.run(eng.close())
    finally:
        stop_server(proc)


def stop_server(proc: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL after 30 s."""
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
