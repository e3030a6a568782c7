"""YAML <-> :class:`rockroll.trainer.config.TrainConfig`, with ``key=value`` overrides.

Unknown keys are errors that name the closest known key; values are type-checked against the
field's annotation (ints accepted for floats). ``a.b=value`` overrides parse ``value`` as YAML.
"""

from __future__ import annotations

import dataclasses
import difflib
import typing
from pathlib import Path
from typing import Any

from rockroll.trainer.config import TrainConfig

__all__ = ["load_config", "config_from_dict", "config_to_dict", "apply_overrides", "save_config", "describe_config"]


def _field_types(cls: type) -> dict[str, Any]:
    import rockroll.trainer.config as mod

    hints = typing.get_type_hints(cls, vars(mod))
    return {fl.name: hints[fl.name] for fl in dataclasses.fields(cls)}


def _coerce(path: str, value: Any, typ: Any) -> Any:
    if dataclasses.is_dataclass(typ):
        if not isinstance(value, dict):
            raise ValueError(f"{path} must be a mapping of its fields, got {type(value).__name__}")
        return _build(typ, value, path + ".")
    if typ is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if typ is float and isinstance(value, str):
        try:
            return float(value)  # YAML reads "1e-4" as a string
        except ValueError:
            pass
    origin = typing.get_origin(typ) or typ
    if origin in (list, dict, str, int, float, bool) and not isinstance(value, origin):
        raise ValueError(f"{path} must be {getattr(origin, '__name__', origin)}, got {value!r}")
    if origin is int and isinstance(value, bool):
        raise ValueError(f"{path} must be an int, got {value!r}")
    return value


def _build(cls: type, data: dict[str, Any], prefix: str = "") -> Any:
    types = _field_types(cls)
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        if key not in types:
            close = difflib.get_close_matches(key, list(types), n=1)
            hint = f"; did you mean {prefix}{close[0]}?" if close else f"; known keys: {', '.join(types)}"
            raise ValueError(f"unknown config key {prefix}{key}{hint}")
        kwargs[key] = _coerce(prefix + key, value, types[key])
    return cls(**kwargs)


def config_from_dict(data: dict[str, Any]) -> TrainConfig:
    """Build and validate a :class:`TrainConfig` from a nested mapping."""
    return _build(TrainConfig, data or {})


def config_to_dict(cfg: Any) -> dict[str, Any]:
    """The config as plain nested dicts (YAML-ready)."""
    return dataclasses.asdict(cfg)


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply ``a.b.c=value`` overrides (value parsed as YAML) to a nested dict, in place."""
    import yaml

    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ValueError(f"override {item!r} must look like key=value, e.g. optim.lr=1e-4")
        node = data
        parts = key.strip().split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise ValueError(f"override {item!r}: {p} is not a section")
        node[parts[-1]] = yaml.safe_load(raw)
    return data


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> TrainConfig:
    """Read a YAML config (or defaults when ``path`` is None), apply overrides, validate."""
    import yaml

    data: dict[str, Any] = {}
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise FileNotFoundError(f"config file {p} not found; see configs/ for examples")
        data = yaml.safe_load(p.read_text()) or {}
        if not isinstance(data, dict):
            raise ValueError(f"{p} must hold a mapping of config sections")
    apply_overrides(data, list(overrides or []))
    return config_from_dict(data)


def save_config(cfg: TrainConfig, path: str | Path) -> None:
    """Write the resolved config as YAML."""
    import yaml

    Path(path).write_text(yaml.safe_dump(config_to_dict(cfg), sort_keys=False))


def describe_config(cls: type = TrainConfig, prefix: str = "") -> list[tuple[str, str, str]]:
    """``(key, default, help)`` for every field, nested sections flattened."""
    rows: list[tuple[str, str, str]] = []
    types = _field_types(cls)
    for fl in dataclasses.fields(cls):
        if dataclasses.is_dataclass(types[fl.name]):
            rows += describe_config(types[fl.name], prefix + fl.name + ".")
            continue
        default = fl.default_factory() if fl.default_factory is not dataclasses.MISSING else fl.default  # type: ignore[misc]
        rows.append((prefix + fl.name, repr(default), fl.metadata.get("help", "")))
    return rows
