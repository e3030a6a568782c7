"""``rockroll serve-model`` serves a run's export as it was trained: a real (one-step) training run's
``export/final`` through the real server answers a chat request with the tokens the trainer's turn
produces (its rockroll_episode.json: no system message, 6 tokens per turn), and ``--no-episode``
serves the messages as sent."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
httpx = pytest.importorskip("httpx")

import rockroll.envhub as envhub  # noqa: E402
from tests.agentrl.model_server import model_server  # noqa: E402

ENV = {"env_id": "FrozenLake-v0", "env_kwargs": {"is_slippery": False}}
TURN_TOKENS = 6


@pytest.fixture(scope="module")
def export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``export/final`` of a one-step multi-turn FrozenLake run of a tiny model (system_prompt none)."""
    from rockroll.agentrl.models.tiny import TinyModelConfig, build_tiny_model
    from rockroll.trainer.config_io import config_from_dict
    from rockroll.trainer.pipeline import run_training

    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("episode")
    small = TinyModelConfig(hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=64)
    model = build_tiny_model(root / "model", small)
    cfg = config_from_dict({
        "name": "served", "seed": 1, "total_steps": 1, "model": {"path": str(model), "build_tiny": False},
        "rollout": {"mode": "multiturn", **ENV, "eval_episodes": 2, "eval_every": 0,
                    "episode": {"max_turns": 2, "max_tokens_per_turn": TURN_TOKENS, "system_prompt": "none",
                                "history": "last_k", "history_k": 0, "temperature": 1.0},
                    "scheduler": {"group_size": 2, "num_env_groups": 2}},
        "algo": {"dynamic_sampling": False}, "optim": {"micro_batch_size": 8}, "sft": {"steps": 0},
        "logging": {"run_dir": str(root / "runs"), "progress": False, "tensorboard": False},
    })  # fmt: skip
    final = Path(run_training(cfg)["export_final"])
    episode = json.loads((final / "rockroll_episode.json").read_text())
    assert episode["system_prompt"] == "none" and episode["max_tokens_per_turn"] == TURN_TOKENS
    return final


def _trainer_turn(model_dir: Path, observation: str) -> tuple[list[int], list[int]]:
    """The prompt and greedy response of the trainer's first turn on ``observation`` (its own code)."""
    from rockroll.agentrl.engines import GenerationRequest, SamplingParams
    from rockroll.agentrl.engines.hf import HFEngine
    from rockroll.agentrl.models.chat import PromptBuilder

    engine = HFEngine(model_path=str(model_dir))
    prompt = PromptBuilder(engine.tokenizer, "", history="last_k", last_k=0).first_prompt(observation)

    async def go() -> list[int]:
        try:
            req = GenerationRequest(prompt, SamplingParams(max_new_tokens=TURN_TOKENS, temperature=0.0))
            return list((await engine.generate(req)).token_ids)
        finally:
            await engine.close()

    return prompt, asyncio.run(go())


@pytest.mark.slow
def test_the_export_is_served_as_it_was_trained(export: Path) -> None:
    env = envhub.make(ENV["env_id"], **ENV["env_kwargs"])
    obs, _ = env.reset(seed=3)
    instructions = env.system_prompt()
    prompt, response = _trainer_turn(export, obs)
    with model_server(export, "policy") as url:
        # what a user reads in the README: the env's instructions as the system message, the observation
        body = {
            "model": "policy",
            "messages": [{"role": "system", "content": instructions}, {"role": "user", "content": obs}],
            "temperature": 0,
            "return_token_ids": True,
        }
        choice = httpx.post(url + "/v1/chat/completions", json=body, timeout=120).json()["choices"][0]
        assert choice["prompt_token_ids"] == prompt  # the system message dropped, as in training
        assert choice["token_ids"] == response and len(response) <= TURN_TOKENS
        # the same request without a system message: the same turn
        body["messages"] = body["messages"][1:]
        assert httpx.post(url + "/v1/chat/completions", json=body, timeout=120).json()["choices"][0] == choice
        # a request may ask for more tokens than the turn had
        longer = httpx.post(url + "/v1/chat/completions", json={**body, "max_tokens": 12}, timeout=120).json()
        assert longer["choices"][0]["token_ids"][: len(response)] == response
        assert len(longer["choices"][0]["token_ids"]) > TURN_TOKENS or longer["choices"][0]["finish_reason"] == "stop"


def test_no_episode_serves_messages_as_sent(export: Path) -> None:
    env = envhub.make(ENV["env_id"], **ENV["env_kwargs"])
    obs, _ = env.reset(seed=3)
    prompt, _ = _trainer_turn(export, obs)
    with model_server(export, "policy", args=("--no-episode",)) as url:
        messages = [{"role": "system", "content": env.system_prompt()}, {"role": "user", "content": obs}]
        body = {"model": "policy", "messages": messages, "temperature": 0, "max_tokens": 3, "return_token_ids": True}
        choice = httpx.post(url + "/v1/chat/completions", json=body, timeout=120).json()["choices"][0]
        assert len(choice["prompt_token_ids"]) > len(prompt)  # the system message went in


def test_an_export_records_the_env_instructions_and_the_server_applies_them(tmp_path: Path) -> None:
    """A run with ``system_prompt: env`` records its env's instructions beside the export; serve-model applies
    them even where the env cannot be made (an owner's env registered on a server); an RLVR export names its
    dataset and no env."""
    from rockroll.agentrl.serving.episode import load_episode
    from rockroll.trainer.config_io import config_from_dict
    from rockroll.trainer.rollout.multiturn import env_instructions, write_episode

    cfg = config_from_dict({"rollout": {"mode": "multiturn", **ENV, "episode": {"system_prompt": "env"}}})
    text = env_instructions(cfg)
    env = envhub.make(ENV["env_id"], **ENV["env_kwargs"])
    env.reset(seed=0)
    assert text and text == env.system_prompt()
    episode = json.loads((write_episode(tmp_path, cfg, text) / "rockroll_episode.json").read_text())
    assert episode["system_text"] == text and episode["envs"][0]["env_id"] == ENV["env_id"]
    episode["envs"][0]["env_id"] = "alice/Nim-v0"  # not makeable here: the recorded text is what applies
    (tmp_path / "rockroll_episode.json").write_text(json.dumps(episode))
    served = load_episode(tmp_path)
    assert served is not None and served.system_text == text
    none = config_from_dict({"rollout": {"mode": "multiturn", **ENV, "episode": {"system_prompt": "none"}}})
    assert env_instructions(none) is None
    rlvr = config_from_dict({"rollout": {"mode": "rlvr"}})
    recorded = json.loads((write_episode(tmp_path, rlvr) / "rockroll_episode.json").read_text())
    assert recorded["mode"] == "rlvr" and "envs" not in recorded and recorded["rlvr"]["dataset"]
    assert load_episode(tmp_path) is None  # no turn settings: served with OpenAI's defaults
