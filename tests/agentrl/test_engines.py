"""LLM engines: batched hf engine, OpenAI engine vs a real serve-model process, factory, vllm/sglang."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from rockroll.agentrl.engines import EngineError, GenerationRequest, SamplingParams, make_engine  # noqa: E402
from rockroll.agentrl.engines.hf import HFEngine  # noqa: E402
from rockroll.agentrl.models.tiny import build_tiny_model  # noqa: E402
from tests.agentrl.model_server import free_port, model_server  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny_engine") / "model")


@pytest.fixture(scope="module")
def engine(tiny_path: Path):
    eng = HFEngine(tiny_path, seed=0)
    yield eng
    asyncio.run(eng.close())


def _prompts(tok, n: int) -> list[list[int]]:
    """Chat prompts of different lengths (so left-padding matters) built from env observations."""
    import rockroll.envhub as envhub

    env = envhub.make("FrozenLake-v0")
    out = []
    for i in range(n):
        obs, _ = env.reset(seed=i)
        msgs = [{"role": "user", "content": obs + "\n" * (i % 4)}]
        text = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
        out.append(tok.encode(text, add_special_tokens=False))
    return out


def _run(engine, requests):
    async def go():
        return await asyncio.gather(*(engine.generate(r) for r in requests))

    return asyncio.run(go())


def _reference_logprobs(model, prompt: list[int], response: list[int]) -> list[float]:
    with torch.no_grad():
        logp = torch.log_softmax(model(torch.tensor([prompt + response])).logits[0].float(), dim=-1)
    return [logp[len(prompt) - 1 + j, t].item() for j, t in enumerate(response)]


def test_logprobs_match_a_full_forward_pass(engine) -> None:
    prompts = _prompts(engine.tokenizer, 8)
    params = [
        SamplingParams(max_new_tokens=12, temperature=t, top_k=k, seed=i)
        for i, (t, k) in enumerate([(1.0, 0), (0.7, 0), (0.0, 0), (1.3, 5)] * 2)
    ]
    results = _run(engine, [GenerationRequest(p, sp) for p, sp in zip(prompts, params, strict=True)])
    for p, r in zip(prompts, results, strict=True):
        assert len(r.logprobs) == len(r.token_ids) > 0
        ref = _reference_logprobs(engine.model, p, r.token_ids)
        assert max(abs(a - b) for a, b in zip(ref, r.logprobs, strict=True)) < 1e-4
        assert r.tokens_exact and r.logprobs_exact


def test_concurrent_requests_share_batched_forwards(engine) -> None:
    prompts = _prompts(engine.tokenizer, 16)
    new = 16
    before = engine.stats["forward_calls"]
    results = _run(
        engine, [GenerationRequest(p, SamplingParams(max_new_tokens=new, seed=i)) for i, p in enumerate(prompts)]
    )
    calls = engine.stats["forward_calls"] - before
    assert all(len(r.token_ids) <= new for r in results)
    tokens = sum(len(r.token_ids) for r in results)
    # one forward per decoding step for the whole batch (a few waves at most), not one per token
    assert calls <= 3 * new
    assert calls < tokens / 4


def test_requests_join_a_running_batch(engine) -> None:
    """Continuous batching: requests arriving mid-decode are merged into the running batch (both
    when their prompts are longer and shorter than the running cache), finish without waiting
    for the long request, and every logprob still matches a full forward pass."""
    prompts = _prompts(engine.tokenizer, 5)
    long_req = GenerationRequest(prompts[0][:3], SamplingParams(max_new_tokens=160, temperature=0.0))
    joiners = [
        GenerationRequest(p, SamplingParams(max_new_tokens=6, temperature=t, seed=i))
        for i, (p, t) in enumerate(zip(prompts[1:], [0.0, 1.0, 0.7, 0.0], strict=True))
    ]

    async def go():
        start = engine.stats["tokens"]
        long_task = asyncio.create_task(engine.generate(long_req))
        while engine.stats["tokens"] - start < 5:  # the long request is decoding, cache shorter than prompts
            await asyncio.sleep(0.002)
        early = await asyncio.gather(*(engine.generate(r) for r in joiners[:2]))
        while engine.stats["tokens"] - start < 90:  # now the running cache is longer than the prompts
            await asyncio.sleep(0.002)
        late = await asyncio.gather(*(engine.generate(r) for r in joiners[2:]))
        done_early = long_task.done()
        return await long_task, early + late, done_early

    long_res, short, long_was_done = asyncio.run(go())
    assert not long_was_done
    assert len(long_res.token_ids) == 160
    solo = _run(engine, [long_req])[0]
    assert long_res.token_ids == solo.token_ids
    for req, res in [(long_req, long_res), *zip(joiners, short, strict=True)]:
        ref = _reference_logprobs(engine.model, req.prompt_ids, res.token_ids)
        assert max(abs(a - b) for a, b in zip(ref, res.logprobs, strict=True)) < 1e-4
    assert short[0].token_ids == _run(engine, [joiners[0]])[0].token_ids


def test_greedy_is_deterministic_and_matches_transformers(engine) -> None:
    prompts = _prompts(engine.tokenizer, 6)
    req = [GenerationRequest(p, SamplingParams(max_new_tokens=10, temperature=0.0)) for p in prompts]
    batched = _run(engine, req)
    again = _run(engine, req)
    alone = [_run(engine, [r])[0] for r in req[:3]]
    assert [r.token_ids for r in batched] == [r.token_ids for r in again]
    assert [r.token_ids for r in batched[:3]] == [r.token_ids for r in alone]
    ref = engine.model.generate(torch.tensor([prompts[0]]), max_new_tokens=10, do_sample=False)[0, len(prompts[0]) :]
    assert batched[0].token_ids == ref.tolist()[: len(batched[0].token_ids)]


def test_seeded_sampling_is_deterministic(engine) -> None:
    prompts = _prompts(engine.tokenizer, 4)

    def sample(seeds, with_others: bool):
        reqs = [
            GenerationRequest(p, SamplingParams(max_new_tokens=16, temperature=1.0, seed=s))
            for p, s in zip(prompts, seeds, strict=True)
        ]
        if with_others:
            reqs += [GenerationRequest(prompts[0], SamplingParams(max_new_tokens=5, temperature=1.0))]
        return [r.token_ids for r in _run(engine, reqs)][: len(prompts)]

    a = sample([1, 2, 3, 4], with_others=False)
    b = sample([1, 2, 3, 4], with_others=True)
    c = sample([5, 6, 7, 8], with_others=False)
    assert a == b
    assert a != c


def test_top_k_one_and_tiny_top_p_are_greedy(engine) -> None:
    p = _prompts(engine.tokenizer, 1)[0]
    greedy = _run(engine, [GenerationRequest(p, SamplingParams(max_new_tokens=8, temperature=0.0))])[0].token_ids
    for sp in [SamplingParams(max_new_tokens=8, top_k=1, seed=3), SamplingParams(max_new_tokens=8, top_p=1e-6, seed=4)]:
        assert _run(engine, [GenerationRequest(p, sp)])[0].token_ids == greedy


def test_stop_token_ids_end_the_response(engine) -> None:
    p = _prompts(engine.tokenizer, 1)[0]
    greedy = _run(engine, [GenerationRequest(p, SamplingParams(max_new_tokens=8, temperature=0.0))])[0]
    assert greedy.finish_reason == "length" and len(greedy.token_ids) == 8
    first = greedy.token_ids.index(stop := greedy.token_ids[2])
    sp = SamplingParams(max_new_tokens=8, temperature=0.0, stop_token_ids=[stop])
    r = _run(engine, [GenerationRequest(p, sp)])[0]
    assert r.finish_reason == "stop" and r.token_ids == greedy.token_ids[: first + 1]


def _eos_loving_state_dict(model, eos: int) -> dict:
    """Weights under which every next token is EOS: blocks add nothing, so the last hidden state
    is the (normalised) input embedding, all-ones; EOS's (tied) output row is largest along it."""
    sd = {k: v.clone() for k, v in model.state_dict().items()}
    emb = torch.full_like(sd["model.embed_tokens.weight"], 0.01)
    emb[eos] = 1.0
    sd["model.embed_tokens.weight"] = emb
    if "lm_head.weight" in sd:
        sd["lm_head.weight"] = emb.clone()
    sd["model.norm.weight"] = torch.ones_like(sd["model.norm.weight"])
    for k in sd:
        if k.endswith(("o_proj.weight", "down_proj.weight")):
            sd[k] = torch.zeros_like(sd[k])
    return sd


def test_update_weights_changes_outputs_bumps_version_and_eos_stops(tiny_path: Path) -> None:
    eng = HFEngine(tiny_path)
    try:
        eos = eng.tokenizer.eos_token_id
        p = _prompts(eng.tokenizer, 1)[0]
        req = GenerationRequest(p, SamplingParams(max_new_tokens=8, temperature=0.0))
        before = _run(eng, [req])[0]
        assert before.weight_version == 0 and eos not in before.token_ids
        original = {k: v.clone() for k, v in eng.model.state_dict().items()}
        eng.update_weights(_eos_loving_state_dict(eng.model, eos), version=7)
        after = _run(eng, [req, GenerationRequest(p, SamplingParams(max_new_tokens=8, temperature=1.0, seed=1))])
        assert eng.weight_version == 7
        for r in after:
            assert r.weight_version == 7
            assert r.token_ids == [eos] and r.finish_reason == "stop"  # EOS ends the response, included
        eng.update_weights(original, version=8)
        restored = _run(eng, [req])[0]
        assert restored.token_ids == before.token_ids and restored.weight_version == 8
        with pytest.raises(KeyError):
            eng.update_weights({"not.a.param": torch.zeros(1)}, version=9)
    finally:
        asyncio.run(eng.close())


def test_update_weights_waits_for_the_running_batch(tiny_path: Path) -> None:
    eng = HFEngine(tiny_path)
    try:
        p = _prompts(eng.tokenizer, 1)[0]
        sd = _eos_loving_state_dict(eng.model, eng.tokenizer.eos_token_id)

        async def go():
            req = GenerationRequest(p, SamplingParams(max_new_tokens=40, temperature=0.0))
            tasks = [asyncio.create_task(eng.generate(req)) for _ in range(4)]
            await asyncio.sleep(0.05)  # the wave is running
            await eng.update_weights_async(sd, 1)
            late = await eng.generate(GenerationRequest(p, SamplingParams(max_new_tokens=5)))
            return await asyncio.gather(*tasks), late

        early, late = asyncio.run(go())
        # no response mixes weights: early results are whole responses of one version
        # (normally 0: the update waited for the running batch; 1 only if it had not started)
        assert len({r.weight_version for r in early}) == 1
        assert all((r.weight_version, len(r.token_ids)) in {(0, 40), (1, 1)} for r in early)
        assert late.weight_version == 1 and late.token_ids == [eng.tokenizer.eos_token_id]
    finally:
        asyncio.run(eng.close())


def test_closed_engine_refuses(tiny_path: Path) -> None:
    eng = HFEngine(tiny_path)
    asyncio.run(eng.close())
    with pytest.raises(EngineError):
        _run(eng, [GenerationRequest([1, 2, 3])])
    with pytest.raises(ValueError, match="prompt_ids"):  # checked before queueing: a bad id never fails a batch
        _run(HFEngine(model=eng.model, tokenizer=eng.tokenizer), [GenerationRequest([1, 10**6])])


# ------------------------------------------------------------------- openai engine + server
@pytest.fixture(scope="module")
def server_url(tiny_path: Path):
    with model_server(tiny_path, "tiny") as url:
        yield url


@pytest.mark.slow
def test_openai_engine_matches_hf_engine_in_greedy_mode(engine, server_url: str, tiny_path: Path) -> None:
    from rockroll.agentrl.engines.openai_engine import OpenAIEngine

    remote = make_engine("openai", base_url=server_url, tokenizer=tiny_path)
    assert isinstance(remote, OpenAIEngine)
    prompts = _prompts(engine.tokenizer, 6)
    reqs = [GenerationRequest(p, SamplingParams(max_new_tokens=12, temperature=0.0)) for p in prompts]
    local = _run(engine, reqs)

    async def go():
        try:
            return await remote.generate_batch(reqs)
        finally:
            await remote.close()

    got = asyncio.run(go())
    assert remote.model == "tiny"
    for a, b in zip(local, got, strict=True):
        assert b.token_ids == a.token_ids and b.finish_reason == a.finish_reason
        assert b.tokens_exact and b.logprobs_exact
        assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs, strict=True)) < 1e-4


def test_server_endpoints(server_url: str, engine) -> None:
    import httpx

    tok = engine.tokenizer
    models = httpx.get(server_url + "/v1/models").json()
    assert models["data"][0]["id"] == "tiny"
    body = dict(
        model="tiny", prompt="_G__\nOO__", max_tokens=5, temperature=0, logprobs=1, return_tokens_as_token_ids=True
    )
    data = httpx.post(server_url + "/v1/completions", json=body).json()
    choice = data["choices"][0]
    assert len(choice["logprobs"]["tokens"]) == 5 and choice["logprobs"]["tokens"][0].startswith("token_id:")
    assert data["usage"]["completion_tokens"] == 5
    chat = dict(
        model="tiny", messages=[{"role": "user", "content": "_G__"}], max_tokens=4, temperature=0, logprobs=True
    )
    out = httpx.post(server_url + "/v1/chat/completions", json=chat).json()
    assert out["choices"][0]["message"]["role"] == "assistant"
    assert len(out["choices"][0]["logprobs"]["content"]) <= 4
    ids = tok.apply_chat_template([{"role": "user", "content": "_G__"}], add_generation_prompt=True, tokenize=False)
    direct = httpx.post(server_url + "/v1/completions", json={"prompt": ids, "max_tokens": 4, "temperature": 0}).json()
    assert direct["choices"][0]["text"] == out["choices"][0]["message"]["content"]
    bad = httpx.post(server_url + "/v1/completions", json={"prompt": [10**9], "max_tokens": 2})
    assert bad.status_code == 400


def test_openai_engine_falls_back_to_retokenising_text(engine) -> None:
    from rockroll.agentrl.engines.openai_engine import OpenAIEngine

    tok = engine.tokenizer
    remote = OpenAIEngine("http://127.0.0.1:1", tok, model="m")
    req = GenerationRequest([1, 2], SamplingParams(max_new_tokens=4))
    res = remote._parse({"choices": [{"text": "<answer>Left</answer>", "finish_reason": "stop"}]}, req, 0)
    assert not res.tokens_exact and not res.logprobs_exact
    assert res.token_ids[:-1] == tok.encode("<answer>Left</answer>", add_special_tokens=False)
    assert res.token_ids[-1] == tok.eos_token_id  # the stop token the server dropped
    assert len(res.logprobs) == len(res.token_ids) and all(math.isnan(x) for x in res.logprobs)
    lps = {"tokens": ["token_id:5", "token_id:9"], "token_logprobs": [-0.5, -1.0]}
    ok = remote._parse({"choices": [{"text": "", "finish_reason": "length", "logprobs": lps}]}, req, 3)
    assert (ok.token_ids, ok.logprobs, ok.weight_version, ok.logprobs_exact) == ([5, 9], [-0.5, -1.0], 3, True)


def test_openai_engine_reports_a_dead_server(engine) -> None:
    from rockroll.agentrl.engines.openai_engine import OpenAIEngine

    remote = OpenAIEngine(f"http://127.0.0.1:{free_port()}", engine.tokenizer, model="m", max_retries=0, timeout_s=2)
    with pytest.raises(EngineError):
        _run(remote, [GenerationRequest([1, 2], SamplingParams(max_new_tokens=2))])


# ------------------------------------------------------------------------------ factory
def test_factory(tiny_path: Path) -> None:
    from rockroll.agentrl.engines.random_engine import RandomEngine

    assert isinstance(make_engine("random"), RandomEngine)
    hf = make_engine("hf", model_path=tiny_path, max_batch_size=3)
    assert isinstance(hf, HFEngine)
    reqs = [
        GenerationRequest(p, SamplingParams(max_new_tokens=4 + i, temperature=0.0))
        for i, p in enumerate(_prompts(hf.tokenizer, 7))
    ]
    assert [len(r.token_ids) for r in _run(hf, reqs)] == [4 + i for i in range(7)]  # more requests than batch rows
    asyncio.run(hf.close())
    with pytest.raises(ValueError, match=r"unknown engine kind 'tgi': engine kind must be one of hf, openai, "):
        make_engine("tgi")


@pytest.mark.parametrize("kind,package", [("vllm", "vllm"), ("sglang", "sglang")])
def test_optional_engines_say_what_is_missing(kind: str, package: str) -> None:
    try:
        __import__(package)
    except ImportError:
        if kind == "vllm" and (Path(__file__).resolve().parents[2] / ".venv-vllm" / "bin" / "python").is_file():
            pytest.skip("the vLLM venv is built: tests/agentrl/test_vllm_weight_sync.py checks the message without it")
        with pytest.raises(EngineError, match=f"pip install {package}"):
            make_engine(kind, model_path="some/model")
    else:  # pragma: no cover - only where the package is installed
        pytest.skip(f"{package} is installed")


@pytest.mark.gpu
@pytest.mark.parametrize("kind,package", [("vllm", "vllm"), ("sglang", "sglang")])
def test_optional_engines_generate(kind: str, package: str, tiny_path: Path) -> None:  # pragma: no cover
    pytest.importorskip(package)
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    eng = make_engine(kind, model_path=str(tiny_path))
    req = GenerationRequest(_prompts(eng.tokenizer, 1)[0], SamplingParams(max_new_tokens=6, temperature=0.0))
    r = _run(eng, [req, req])
    assert r[0].token_ids == r[1].token_ids and len(r[0].logprobs) == len(r[0].token_ids)
    asyncio.run(eng.close())
