"""The training config nests the rollout's own models; every key that moved names its new place."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rockroll.agentrl.rollout.config import BatchConfig, EpisodeConfig
from rockroll.envs.config import ConfigError
from rockroll.envs.config_loader import describe_config
from rockroll.trainer.config import RolloutConfig, TrainConfig, TrainEpisodeConfig
from rockroll.trainer.config_io import config_help, load_config
from rockroll.trainer.rollout.plan import PlanConfig

CONFIGS = sorted((Path(__file__).resolve().parents[2] / "configs").glob("*.yaml"))
MOVED = dict(RolloutConfig.moved_keys)
NEW_KEYS = {row.key for row in describe_config(TrainConfig)}


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_key_is_refused_with_its_new_place(old: str, tmp_path: Path) -> None:
    new = "rollout." + MOVED[old].split(" ")[0]
    assert new in NEW_KEYS or any(k.startswith(new + ".") for k in NEW_KEYS)  # the place named exists
    with pytest.raises(ConfigError) as override:
        load_config(None, [f"rollout.{old}=1"])
    assert override.value.key == f"rollout.{old}"
    assert str(override.value).startswith(f"rollout.{old} moved to {new}")
    path = tmp_path / "old.yaml"
    path.write_text(yaml.safe_dump({"rollout": {old: 1}}))
    with pytest.raises(ConfigError, match=f"rollout.{old} moved to {new}"):
        load_config(path)
    with pytest.raises(ConfigError, match=f"rollout.{old} moved to {new}"):
        TrainConfig(rollout={old: 1})


def test_the_renamed_keys_say_how_to_translate_their_values() -> None:
    with pytest.raises(ConfigError, match="rollout.max_new_tokens moved to rollout.episode.max_tokens_per_turn"):
        load_config(None, ["rollout.max_new_tokens=8"])
    with pytest.raises(ConfigError, match="rollout.groups_per_step moved to rollout.scheduler.num_env_groups"):
        load_config(None, ["rollout.groups_per_step=8"])
    with pytest.raises(ConfigError, match=r"rollout.episode.history \(last_k, with episode.history_k: N"):
        load_config(None, ["rollout.history_window=0"])
    with pytest.raises(ConfigError, match=r"rollout.episode.lockstep \(auto, true"):
        load_config(None, ["rollout.turn_batching=lockstep"])


def test_the_new_keys_reach_the_rollouts_own_models() -> None:
    cfg = load_config(
        None,
        [
            "rollout.episode.max_tokens_per_turn=8",
            "rollout.episode.history=full",
            "rollout.scheduler.num_env_groups=3",
            "rollout.scheduler.group_size=2",
            "rollout.plan.max_actions=5",
        ],
    )
    r = cfg.rollout
    assert isinstance(r.episode, EpisodeConfig) and isinstance(r.scheduler, BatchConfig)
    assert (r.episode.max_tokens_per_turn, r.episode.history) == (8, "full")
    assert (r.scheduler.num_env_groups, r.scheduler.group_size, r.plan.max_actions) == (3, 2, 5)


def test_a_partial_episode_section_keeps_the_training_defaults() -> None:
    ep = TrainConfig(rollout={"episode": {"temperature": 0.5}}).rollout.episode
    assert (ep.temperature, ep.max_turns, ep.max_tokens_per_turn, ep.episode_timeout_s) == (0.5, 20, 24, 240.0)
    assert (ep.history, ep.history_k, ep.lockstep, ep.max_invalid_actions) == ("last_k", 2, False, 5)
    generic = EpisodeConfig()
    assert (generic.max_turns, generic.episode_timeout_s) == (10, 600.0)  # agentrl's own defaults stay its own
    for name, field in TrainEpisodeConfig.model_fields.items():  # the training defaults change defaults only
        owner = EpisodeConfig.model_fields[name]
        assert (field.description, field.metadata, field.annotation) == (
            owner.description,
            owner.metadata,
            owner.annotation,
        )


def test_each_rollout_setting_is_declared_once() -> None:
    own = set(RolloutConfig.model_fields) - {"episode", "scheduler", "plan"}
    for nested in (EpisodeConfig, BatchConfig, PlanConfig):
        assert not own & set(nested.model_fields), f"RolloutConfig re-declares {own & set(nested.model_fields)}"
    tagged = [
        n for n, f in RolloutConfig.model_fields.items() if (f.description or "").startswith(("multiturn:", "plan"))
    ]
    assert tagged == ["mode"]  # the mode's own description names its choices; no field says which half it serves


def test_help_config_shows_the_nesting() -> None:
    text = config_help()
    for key in ("rollout.episode.max_tokens_per_turn", "rollout.scheduler.num_env_groups", "rollout.plan.max_actions"):
        assert key in text
    assert "rollout.max_new_tokens " not in text and "rollout.groups_per_step " not in text


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_shipped_configs_use_the_new_keys(path: Path) -> None:
    rollout = yaml.safe_load(path.read_text()).get("rollout", {})
    assert not set(rollout) & set(MOVED), f"{path.name} still has {set(rollout) & set(MOVED)}"
    load_config(path)  # and it loads
