"""The engine Ray actor's proxy: requests of one event-loop tick travel as one Ray call, and each
request keeps its own result or its own error."""

from __future__ import annotations

import asyncio

import pytest

torch = pytest.importorskip("torch")
ray = pytest.importorskip("ray")


@pytest.mark.slow
def test_requests_of_one_tick_share_a_ray_call(tiny_model_dir) -> None:
    from rockroll.agentrl.engines.base import GenerationRequest, SamplingParams
    from rockroll.trainer.config_io import config_from_dict
    from rockroll.trainer.learner.models import load_policy
    from rockroll.trainer.learner.ray_workers import RayEngine

    cfg = config_from_dict({"model": {"path": str(tiny_model_dir)}, "workers": {"use_ray": True}})
    model, tok = load_policy(cfg.model)
    weights = {k: v.detach().clone() for k, v in model.state_dict().items()}
    prompt = tok.encode("<|im_start|>user\nP _\n_ G<|im_end|>\n<|im_start|>assistant\n", add_special_tokens=False)
    params = SamplingParams(max_new_tokens=3, temperature=1.0)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1")
    try:
        engine = RayEngine(cfg, weights, tok)

        async def run() -> list:
            good = [engine.generate(GenerationRequest(prompt, params, f"r{i}")) for i in range(24)]
            bad = engine.generate(GenerationRequest([len(tok) + 1000], params, "bad"))  # an id outside the vocabulary
            return await asyncio.gather(*good, bad, return_exceptions=True)

        out = asyncio.run(run())
        assert engine.calls == 1  # 25 requests, one Ray call
        assert all(len(r.token_ids) >= 1 and len(r.logprobs) == len(r.token_ids) for r in out[:24])
        assert isinstance(out[24], ValueError) and "prompt_ids" in str(out[24])  # only the bad request failed

        async def later() -> list:  # requests of separate ticks: separate calls
            a = await engine.generate(GenerationRequest(prompt, params, "a"))
            b = await engine.generate(GenerationRequest(prompt, params, "b"))
            return [a, b]

        assert len(asyncio.run(later())) == 2 and engine.calls == 3
        asyncio.run(engine.close())
    finally:
        ray.shutdown()


def test_driver_placement_keeps_the_engine_out_of_ray(tiny_model_dir) -> None:
    """``workers.engine_placement: driver``: with ``use_ray`` the engine is built here, not as a Ray actor (no Ray
    round trip per generation round); ``actor`` (the default) builds the actor's proxy."""
    import asyncio as aio

    from rockroll.agentrl.engines.hf import HFEngine
    from rockroll.trainer.config_io import config_from_dict
    from rockroll.trainer.learner.models import load_policy
    from rockroll.trainer.rollout.setup import build_engine

    cfg = config_from_dict(
        {"model": {"path": str(tiny_model_dir)}, "workers": {"use_ray": True, "engine_placement": "driver"}}
    )
    assert config_from_dict({"workers": {"use_ray": True}}).workers.engine_placement == "actor"
    model, tok = load_policy(cfg.model)
    engine = build_engine(cfg, model, tok)
    try:
        assert isinstance(engine, HFEngine) and not ray.is_initialized()
    finally:
        aio.run(engine.close())
