"""The engine as a training setting (``rollout.engine``): config errors, the registry build, the one place
engines are named, and weight syncs that survive a dead engine."""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Any

import pytest

from rockroll.agentrl.engines import ENGINE_KINDS, EngineDeadError
from rockroll.envs.config import ConfigError
from rockroll.trainer.config_io import config_from_dict

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("agentrl", "api", "cli", "client", "envhub", "envs", "sandbox", "trainer")


def test_unknown_engine_kind_names_the_key_and_the_choices() -> None:
    with pytest.raises(ConfigError) as err:
        config_from_dict({"rollout": {"engine": {"kind": "vlm"}}})
    assert err.value.key == "rollout.engine.kind"
    assert "hf, vllm, sglang, openai" in str(err.value) and "did you mean 'vllm'" in str(err.value)


def test_an_option_the_kind_lacks_names_the_key_and_the_kinds_options() -> None:
    with pytest.raises(ConfigError) as err:
        config_from_dict({"rollout": {"engine": {"kind": "vllm", "max_batch_size": 8}}})  # an hf option
    assert err.value.key == "rollout.engine.max_batch_size"
    assert "weight_transport" in err.value.allowed and "max_batch_size" not in err.value.allowed
    with pytest.raises(ConfigError, match="did you mean rollout.engine.dtype"):
        config_from_dict({"rollout": {"engine": {"kind": "vllm", "dtyp": "float32"}}})
    with pytest.raises(ConfigError, match="rollout.engine.weight_transport must be one of folder, bytes"):
        config_from_dict({"rollout": {"engine": {"kind": "vllm", "weight_transport": "pipe"}}})


def test_engine_defaults_to_hf_and_round_trips_through_a_saved_config(tmp_path: Path) -> None:
    from rockroll.trainer.config_io import load_config, save_config

    assert config_from_dict({}).rollout.engine.kind == "hf"
    assert config_from_dict({"rollout": {"engine": {"max_batch_size": 32}}}).rollout.engine.max_batch_size == 32
    cfg = config_from_dict({"rollout": {"engine": {"kind": "vllm", "dtype": "bfloat16", "cpu_threads": 2}}})
    save_config(cfg, tmp_path / "c.yaml")
    again = load_config(tmp_path / "c.yaml", ["rollout.engine.max_model_len=1024"])
    assert again.rollout.engine.kind == "vllm" and again.rollout.engine.dtype == "bfloat16"
    assert again.rollout.engine.max_model_len == 1024 and again.rollout.engine.cpu_threads == 2


def test_vllm_missing_is_one_line_saying_how_to_install_it() -> None:
    from rockroll.trainer.rollout.setup import build_engine

    cfg = config_from_dict({"rollout": {"engine": {"kind": "vllm", "python_executable": "/nonexistent/python"}}})
    with pytest.raises(ConfigError) as err:
        build_engine(cfg, None, None)
    assert err.value.key == "rollout.engine.kind"
    assert "\n" not in str(err.value) and "bash scripts/setup-vllm.sh" in str(err.value)


def test_an_engine_without_weight_updates_cannot_follow_training() -> None:
    from rockroll.trainer.rollout.engine_sync import engine_for

    cfg = config_from_dict({"rollout": {"engine": {"kind": "openai"}}, "total_steps": 5})
    with pytest.raises(ConfigError, match="openai takes no weight updates"):
        engine_for(cfg, None, None)


def test_the_engine_is_built_through_the_registry_with_the_configs_options(monkeypatch, tiny_model_dir) -> None:
    import rockroll.trainer.rollout.engine_sync as es
    from rockroll.trainer.learner.models import load_policy

    calls: list[tuple[str, dict[str, Any]]] = []
    real = es.make_engine
    monkeypatch.setattr(es, "make_engine", lambda kind, **kw: calls.append((kind, kw)) or real(kind, **kw))
    cfg = config_from_dict({"model": {"path": str(tiny_model_dir)}, "seed": 3,
                            "rollout": {"engine": {"kind": "hf", "max_batch_size": 7}}})  # fmt: skip
    model, tok = load_policy(cfg.model)
    engine = es.engine_for(cfg, model, tok)
    try:
        assert type(engine) is ENGINE_KINDS.get("hf") and engine.max_batch_size == 7
        assert engine.model is not model  # a frozen copy: the trainer's updates reach it only by a sync
    finally:
        import asyncio

        asyncio.run(engine.close())
    kind, kw = calls[0]
    assert kind == "hf" and kw["seed"] == 3 and kw["tokenizer"] is tok and "kind" not in kw

    calls.clear()  # vllm: the model folder, the config's options, engine_kwargs flattened; nothing started here
    monkeypatch.setattr(es, "make_engine", lambda kind, **kw: calls.append((kind, kw)))
    vcfg = config_from_dict({"model": {"path": str(tiny_model_dir)}, "rollout": {"engine": {
        "kind": "vllm", "python_executable": sys.executable, "weight_transport": "folder",
        "engine_kwargs": {"swap_space": 0}}}})  # fmt: skip
    es.engine_for(vcfg, model, tok)
    kind, kw = calls[0]
    assert kind == "vllm" and kw["model_path"] == str(tiny_model_dir) and kw["weight_transport"] == "folder"
    assert kw["swap_space"] == 0 and "engine_kwargs" not in kw and kw["dtype"] == "float32"


def _engine_class_names() -> set[str]:
    entries = [ENGINE_KINDS.entry(kind) for kind in ENGINE_KINDS]
    return {e.split(":")[1] if isinstance(e, str) else e.__name__ for e in entries}


def test_no_module_outside_agentrl_engines_names_an_engine_class() -> None:
    """Engines are built by kind (make_engine): only agentrl/engines/ may import or name their classes."""
    names = _engine_class_names()
    assert {"HFEngine", "VLLMEngine", "SGLangEngine", "OpenAIEngine"} <= names
    found = []
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            if path.is_relative_to(ROOT / "agentrl" / "engines"):
                continue
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                used = {a.name for a in node.names} if isinstance(node, ast.ImportFrom) else set()
                used |= {node.id} if isinstance(node, ast.Name) else set()
                used |= {node.attr} if isinstance(node, ast.Attribute) else set()
                found += [f"{path.relative_to(ROOT)}:{node.lineno} {n}" for n in used & names]
    assert not found, f"engine classes named outside agentrl/engines/ (use make_engine): {found}"


class _DyingEngine:
    """A fake engine whose sync fails with a dead engine at the given calls; restart() brings it back."""

    name = "fake"

    def __init__(self, die_at: set[int]) -> None:
        self.die_at, self.calls, self.restarts, self.loaded, self.alive = die_at, 0, 0, [], True
        self.slept: list[str] = []

    def update_weights(self, weights: Any, version: int) -> None:
        self.calls += 1
        if not self.alive or self.calls in self.die_at:
            self.alive = False
            raise EngineDeadError("the fake engine died during the sync")
        self.loaded.append(version)

    def restart(self) -> None:
        self.alive, self.restarts = True, self.restarts + 1

    def sleep(self, level: int = 1) -> bool:
        self.slept.append(f"sleep{level}")
        return True

    def wake_up(self) -> bool:
        self.slept.append("wake")
        return True


def test_a_sync_that_kills_the_engine_restarts_it_and_syncs_again() -> None:
    from rockroll.trainer.rollout.engine_sync import EngineSync

    engine = _DyingEngine(die_at={2})
    sync = EngineSync(engine, may_sleep=True)
    for version in (1, 2, 3):
        sync.release()
        metrics = sync.push({}, version)
        assert metrics["system/weight_version"] == version
    assert engine.loaded == [1, 2, 3] and engine.restarts == sync.sync_restarts == 1
    assert sync.new_restarts() == 1.0 and sync.new_restarts() == 0.0
    assert engine.slept == ["sleep1", "wake"] * 3  # asleep through each update, awake before each load
    dead = _DyingEngine(die_at={1, 2, 3})
    with pytest.raises(EngineDeadError):  # dead at every try: the run stops with the infra error, named
        EngineSync(dead, attempts=3).push({}, 1)
    assert dead.restarts == 2


def test_an_engine_that_cannot_sleep_is_left_awake() -> None:
    from rockroll.trainer.rollout.engine_sync import EngineSync

    engine = _DyingEngine(die_at=set())
    engine.sleep = lambda level=1: False  # type: ignore[method-assign] - a CPU vLLM host: no sleep mode
    sync = EngineSync(engine, may_sleep=True)
    sync.release()
    sync.push({}, 1)
    assert not sync.asleep and "wake" not in engine.slept
    EngineSync(engine, may_sleep=False).release()  # async rollout runs ahead: never asked to sleep
