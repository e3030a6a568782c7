"""YAML <-> :class:`rockroll.trainer.config.TrainConfig`, with ``key=value`` overrides.

The trainer's names for the one loader (:mod:`rockroll.envs.config_loader`), bound to
``TrainConfig``: unknown keys, wrong types and bad choices raise
:class:`~rockroll.envs.config.ConfigError` naming the dotted key and what it accepts;
``a.b=value`` overrides parse ``value`` as YAML. :func:`save_config` writes the resolved config
(every key), which :func:`load_config` reads back equal.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rockroll.envs import config_loader as loader
from rockroll.envs.config import ConfigError
from rockroll.envs.config_loader import ConfigField, apply_overrides, config_to_dict, save_config
from rockroll.trainer.config import TrainConfig

__all__ = [
    "ConfigError",
    "load_config",
    "config_from_dict",
    "config_to_dict",
    "apply_overrides",
    "save_config",
    "describe_config",
    "config_help",
]


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> TrainConfig:
    """Read a YAML config (or the defaults when ``path`` is None), apply overrides, validate."""
    return loader.load_config(TrainConfig, path, list(overrides or []))


def config_from_dict(data: dict[str, Any] | None) -> TrainConfig:
    """Build and validate a :class:`TrainConfig` from a nested mapping."""
    return loader.parse_config(TrainConfig, data or {})


def describe_config() -> list[ConfigField]:
    """``(key, type, default, description)`` of every training key, nested sections dotted."""
    return loader.describe_config(TrainConfig)


def config_help() -> str:
    """The text of ``rockroll train --help-config``."""
    return loader.format_config_help(
        TrainConfig,
        "rockroll train: config keys (YAML sections, or key=value overrides such as optim.lr=3e-4)",
    )
