"""The SGLang engine's HTTP client and weight-sync contract, against a fake of SGLang's HTTP API."""

from __future__ import annotations

import asyncio
import os
import stat
import sys
from pathlib import Path

import pytest

from rockroll.agentrl.engines import EngineDeadError, GenerationRequest, SamplingParams
from rockroll.agentrl.engines.sglang_engine import SGLangEngine
from tests.agentrl.fake_sglang import serve

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")
FAKE = Path(__file__).with_name("fake_sglang.py")


class _Tok:
    eos_token_id = 499


def _generate(engine: SGLangEngine, prompts: list[list[int]], **kw):
    async def go():
        return await asyncio.gather(
            *(engine.generate(GenerationRequest(p, SamplingParams(max_new_tokens=4, **kw))) for p in prompts)
        )

    return asyncio.run(go())


def _weights(value: float) -> dict[str, object]:
    emb = torch.full((6, 2), value)
    return {"model.embed_tokens.weight": emb, "lm_head.weight": emb}  # tied: staged once


def test_generation_weight_sync_and_sleep_over_http(tmp_path: Path) -> None:
    server, state, url = serve()
    engine = SGLangEngine("unused", base_url=url, tokenizer=_Tok(), workdir=tmp_path)
    r = _generate(engine, [[1, 2, 3], [10]])
    assert r[0].token_ids == [4, 5, 6, 7] and r[0].logprobs == [-1.0, -2.0, -3.0, -4.0]
    assert r[0].finish_reason == "length" and r[0].weight_version == 0 and r[1].token_ids == [11, 12, 13, 14]
    body = state.calls[0][1]
    assert body["input_ids"] in ([1, 2, 3], [10]) and body["return_logprob"] is True

    engine.update_weights(_weights(0.5), version=1)
    path, sent = next(c for c in state.calls if c[0] == "/update_weights_from_disk")
    assert sent == {"model_path": str(tmp_path / "weights" / "v1"), "weight_version": "1"}
    assert state.calls[-1][0] == "/flush_cache"
    r = _generate(engine, [[1, 2, 3]])
    assert r[0].logprobs == [-0.5, -1.0, -1.5, -2.0] and r[0].weight_version == 1

    engine.update_weights(_weights(0.25), version=2)
    assert not (tmp_path / "weights" / "v1").exists()  # the previous staged folder is removed
    stopped = _generate(engine, [[1, 2]], stop_token_ids=[4])[0]
    assert stopped.token_ids == [3, 4] and stopped.finish_reason == "stop"
    assert engine.sleep() and state.asleep and engine.wake_up() and not state.asleep

    server.shutdown()
    server.server_close()
    with pytest.raises(EngineDeadError, match="not launched here|unreachable"):
        _generate(engine, [[1]])
    asyncio.run(engine.close())


def test_a_launched_server_restarts_with_the_last_weights(tmp_path: Path) -> None:
    wrapper = tmp_path / "python"  # stands in for the python that runs `-m sglang.launch_server ...`
    wrapper.write_text(f'#!/bin/sh\nshift 2\nexec {sys.executable} {FAKE} "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    engine = SGLangEngine(
        "m", python_executable=wrapper, tokenizer=_Tok(), workdir=tmp_path / "w", startup_timeout_s=60
    )
    assert engine.launched
    engine.update_weights(_weights(2.0), version=7)
    assert _generate(engine, [[1]])[0].logprobs[0] == -2.0
    first = engine._proc
    assert first is not None
    os.kill(first.pid, 9)
    first.wait(timeout=30)
    r = _generate(engine, [[1]])  # the connection fails, the engine relaunches and reloads v7
    assert engine.restarts == 1 and r[0].logprobs[0] == -2.0 and r[0].weight_version == 7
    asyncio.run(engine.close())
